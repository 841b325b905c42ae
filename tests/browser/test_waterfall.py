"""The waterfall in real Chromium: an acquisition run answered live, at 1400 and 390 px."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from dashboard import services
from dashboard.models import Interrupt, Run, RunEvent
from tests.browser.conftest import DESKTOP, PHONE, accessible, no_overflow
from tests.conftest import ARTIFACTS, login, screenshot, wait_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ANSWERS = {"core.region": "Germany", "core.currency": "EUR", "market.price": 47.88}


def answer_until_done(run: Run, operator) -> Run:
    """Answer each question of the run as it comes (the trace page watches live)."""
    while True:
        run = wait_run(run.id)
        if run.status != Run.Status.INTERRUPTED:
            return run
        for question in run.interrupts.filter(status=Interrupt.Status.PENDING):
            field = (question.payload or {}).get("field")
            services.interrupt_answer(interrupt=question, answer=ANSWERS[field], user=operator)


@pytest.mark.parametrize("page", [DESKTOP], indirect=True, ids=["1400"])  # 390: test_accessibility
def test_the_waterfall_of_an_answered_acquisition_run(live_server_url, page, executor,
                                                      operator):
    run = services.run_create(graph="acquisition", input={}, user=operator)
    assert wait_run(run.id).status == Run.Status.INTERRUPTED
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.goto(f"{live_server_url}/runs/{run.id}/")
    waterfall = page.locator("#trace-waterfall")
    expect(waterfall.locator(".wf-bar.wf-human")).to_have_count(1)  # waiting now
    # the open wait is drawn (striped, not transparent) and its figure ticks with the clock
    wide = page.viewport_size["width"] >= 500
    human = waterfall.locator(".wf-bar.wf-human.wf-open")
    assert human.evaluate("e => getComputedStyle(e).backgroundImage") != "none"
    before = page.locator("#wf-human").inner_text()
    page.wait_for_timeout(1300)
    assert page.locator("#wf-human").inner_text() != before
    waterfall.screenshot(path=str(ARTIFACTS / (
        "waterfall-acquisition-waiting" + ("" if wide else "-390") + "-box.png")))
    run = answer_until_done(run, operator)
    assert run.status == Run.Status.SUCCEEDED
    page.wait_for_function(
        f"() => document.getElementById('trace-cursor').dataset.lastSeq === '{run.last_seq}'",
        timeout=30_000)
    # redrawn live with the batches: every wait, every node execution of the log
    waits = RunEvent.objects.filter(run=run, kind=RunEvent.Kind.INTERRUPT_RAISED).count()
    nodes = RunEvent.objects.filter(run=run, kind=RunEvent.Kind.NODE_STARTED).count()
    calls = RunEvent.objects.filter(run=run, kind="model_started").count()
    expect(waterfall.locator(".wf-bar.wf-human")).to_have_count(waits)
    expect(waterfall.locator("button.wf-bar:not(.wf-human):not(.wf-model)")).to_have_count(
        nodes)
    expect(waterfall.locator(".wf-bar.wf-model")).to_have_count(calls)  # once recorded
    assert waits == 3 and waterfall.locator(".wf-bar.wf-tool").count() >= 1  # search
    summary = waterfall.locator("#wf-summary").inner_text()
    assert "Working time" in summary and "Waiting for a human" in summary
    assert "model" in summary and "tools" in summary and "the rest" in summary
    # the wait is the run's longest part, and is kept apart from working time
    human = page.locator("#wf-human").inner_text()
    assert human.endswith(" s") and human != "0.00 s"

    # a bar opens its detail below the waterfall
    waterfall.locator(".wf-bar.wf-tool").first.click()
    detail = page.locator("#waterfall-detail")
    expect(detail).to_contain_text("Payload")
    if calls:
        waterfall.locator(".wf-bar.wf-model").first.click()
        expect(detail.locator(".mc")).to_be_visible()
    box = page.locator("#trace-waterfall .wf-box")
    assert box.evaluate("e => e.scrollWidth <= e.clientWidth + 1")  # bars fit their box
    no_overflow(page)
    name = "waterfall-acquisition" + ("-390" if page.viewport_size["width"] < 500 else "")
    waterfall.scroll_into_view_if_needed()
    screenshot(page, name)
    box.evaluate("e => { e.scrollTop = 0; }")
    waterfall.screenshot(path=str(ARTIFACTS / f"{name}-box.png"))


@pytest.mark.parametrize("page", [DESKTOP], indirect=True, ids=["1400"])  # 390: test_accessibility
def test_a_failed_plan_is_shown_failed_with_its_red_bars(live_server_url, page, executor,
                                                         operator):
    run = wait_run(services.run_create(graph="decomposition", input={
        "inject_failure": "worker_error", "max_retries": 0}, user=operator).id)
    assert run.status == Run.Status.SUCCEEDED  # the graph returned; its plan failed
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.goto(f"{live_server_url}/runs/{run.id}/")
    expect(page.locator("#trace-status")).to_have_text("Finished \u2014 plan failed")
    waterfall = page.locator("#trace-waterfall")
    red = waterfall.locator(".wf-bar.wf-s-failed, .wf-bar.wf-s-err").first
    assert red.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(176, 42, 34)"
    no_overflow(page)
    wide = page.viewport_size["width"] >= 500
    screenshot(page, "failed-plan" + ("" if wide else "-390"))
    waterfall.scroll_into_view_if_needed()
    waterfall.screenshot(path=str(ARTIFACTS / ("failed-plan" + ("" if wide else "-390")
                                               + "-waterfall.png")))
    # the runs list's "Status = Failed" lists it, and so does its outcome
    for query in ("status=failed", "outcome=plan_failed"):
        page.goto(f"{live_server_url}/?{query}")
        expect(page.locator(f"#run-{run.id}-status")).to_have_text(
            "Finished \u2014 plan failed")


def a_plan_reads_well(page) -> None:
    """A finished decomposition: its tasks come before the waterfall and the graph, in rows
    that wrap within the screen, and the result card counts them as the task view does."""
    page.wait_for_function("() => document.querySelector('#trace-dag svg.dag-edges')")
    top = page.evaluate("id => document.getElementById(id).getBoundingClientRect().top",
                        "trace-dag")
    for later in ("trace-waterfall", "trace-graph"):
        assert top < page.evaluate(
            "id => document.getElementById(id).getBoundingClientRect().top", later), later
    assert page.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth")
    assert page.evaluate("() => { const d = document.getElementById('trace-dag');"
                         " return d.scrollWidth <= d.clientWidth; }")
    cards = page.locator("#trace-dag .task")
    shown = cards.count()
    assert shown > 100
    expect(page.locator("#dag-count")).to_contain_text(f"{shown} tasks")
    finished = page.locator("#trace-dag .task.status-ok").count()
    expect(page.locator("#trace-result .result-headline")).to_have_text(
        f"Synthesis of {finished} finished tasks")
    metrics = dict(page.locator("#trace-result .result-metrics div").evaluate_all(
        "ds => ds.map(d => [d.querySelector('dt').textContent, d.querySelector('dd')"
        ".textContent])"))
    assert metrics["tasks"] == str(shown) and metrics["tasks ok"] == str(finished), metrics
    # a goal cut short on its card is there in full on demand
    goal = cards.nth(shown - 1).locator(".tgoal")
    assert len(goal.get_attribute("title")) >= len(goal.text_content().rstrip("…"))


@pytest.mark.parametrize("page", [DESKTOP], indirect=True, ids=["1400"])  # 390: test_accessibility
def test_a_215_task_plan_is_a_folded_tree_with_its_detail_beside(live_server_url, page,
                                                                executor, operator):
    run = wait_run(services.run_create(graph="decomposition", input={"breadth": 14},
                                       user=operator).id, timeout=120)
    assert run.status == Run.Status.SUCCEEDED
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.goto(f"{live_server_url}/runs/{run.id}/")
    waterfall = page.locator("#trace-waterfall")
    # the fan-outs of workers are folded groups, their identical calls said once
    big = waterfall.locator("details.wf-group", has=page.locator(
        "summary", has_text="work \u00d798"))
    expect(big).to_have_count(1)
    assert big.get_attribute("open") is None  # folded
    expect(big.locator("> summary")).to_contain_text("scripted \u00d798")
    big.locator("> summary").click()  # opened: its 98 workers, each with its call under it
    expect(big).to_have_attribute("open", "")
    expect(big.locator(".wf-bar.wf-model")).to_have_count(98)
    wide = page.viewport_size["width"] >= 500
    # a bar opens its detail beside the waterfall on a wide screen, below it on a phone
    waterfall.locator("#wf-rows > .wf-item .wf-bar.wf-model").first.click()
    detail = page.locator("#waterfall-detail")
    expect(detail).to_contain_text("scripted", timeout=20_000)
    flow, side = waterfall.bounding_box(), detail.bounding_box()
    assert (side["x"] > flow["x"] + flow["width"] - 1) if wide else (side["y"] > flow["y"])
    no_overflow(page)
    if wide:
        accessible(page)
    the_dag_counts_picks_out_lights_up_and_folds(page)
    if wide:
        accessible(page)
    waterfall.scroll_into_view_if_needed()
    page.locator("#trace-waterfall .wf-box").evaluate("e => { e.scrollTop = 0; }")
    name = "waterfall-plan-215" + ("" if wide else "-390")
    screenshot(page, name)
    page.locator(".wf-pair").screenshot(path=str(ARTIFACTS / f"{name}-box.png"))
    # the whole page reads well at both widths: tasks first, rows within the screen
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        page.goto(f"{live_server_url}/runs/{run.id}/")
        a_plan_reads_well(page)


def the_dag_counts_picks_out_lights_up_and_folds(page) -> None:
    """The DAG's legend counts each status's cards and picks them out; a chosen task lights
    up with what it waits for and what waits for it; a plan folds."""
    dag = page.locator("#trace-dag")
    ok = dag.locator('.dag-filter[data-status="ok"]')
    cards, oks = dag.locator(".task").count(), dag.locator('.task[data-status="ok"]').count()
    assert oks > 100, oks
    expect(ok.locator(".dag-n")).to_have_text(str(oks))
    ok.click()
    expect(ok).to_have_attribute("aria-pressed", "true")
    expect(dag.locator(".task.dim-filter")).to_have_count(cards - oks)
    ok.click()
    expect(dag.locator(".task.dim-filter")).to_have_count(0)
    card = dag.locator('.task[data-deps]:not([data-deps=""])').first
    card.click()
    expect(card).to_have_class(re.compile(r"\bis-chosen\b"))
    for dep in card.get_attribute("data-deps").split():
        expect(dag.locator(f'.task[data-tid="{dep}"]')).to_have_class(re.compile(r"\bis-up\b"))
    expect(dag.locator(".dag-edges path.on").first).to_be_attached()
    card.click()  # chosen again: unchosen
    expect(dag).not_to_have_class(re.compile(r"\bhas-chosen\b"))
    group = dag.locator(".dag-group").nth(1)
    group.locator(".dag-fold").click()
    expect(group.locator(".dag-levels")).to_be_hidden()
    expect(group.locator(".dag-folded-n")).to_contain_text("tasks folded")
    group.locator(".dag-fold").click()
    expect(group.locator(".dag-levels")).to_be_visible()


AXIS_LABELS = """() => {
  // the text each label of the axis shows, as drawn: a tick's, a break mark's
  const out = [];
  document.querySelectorAll('#wf-axis .wf-tick, #wf-axis .wf-break, #wf-axis .wf-break-label'
                            ).forEach(e => {
    if (getComputedStyle(e).visibility === 'hidden' || !e.textContent.trim()) return;
    const range = document.createRange();
    range.selectNodeContents(e);
    const r = range.getBoundingClientRect();
    out.push({text: e.textContent.trim(), tick: e.classList.contains('wf-tick'),
              left: r.left, right: r.right, top: r.top, bottom: r.bottom});
  });
  return out;
}"""


def overlapping(labels: list[dict]) -> list[tuple[str, str]]:
    """The pairs of axis labels whose text boxes meet (a pixel of slack)."""
    return [(a["text"], b["text"]) for i, a in enumerate(labels) for b in labels[i + 1:]
            if a["left"] < b["right"] - 1 and b["left"] < a["right"] - 1
            and a["top"] < b["bottom"] - 1 and b["top"] < a["bottom"] - 1]


@pytest.mark.parametrize("page", [DESKTOP, PHONE], indirect=True, ids=["1400", "390"])
def test_the_axis_labels_of_shortened_waits_stay_apart(live_server_url, page, executor,
                                                       operator):
    run = services.run_create(graph="acquisition", input={}, user=operator)
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.goto(f"{live_server_url}/runs/{run.id}/")
    while (run := wait_run(run.id)).status == Run.Status.INTERRUPTED:
        page.wait_for_timeout(2500)  # a wait for a human far longer than the work
        for question in run.interrupts.filter(status=Interrupt.Status.PENDING):
            field = (question.payload or {}).get("field")
            services.interrupt_answer(interrupt=question, answer=ANSWERS[field], user=operator)
    assert run.status == Run.Status.SUCCEEDED
    page.wait_for_function(
        f"() => document.getElementById('trace-cursor').dataset.lastSeq === '{run.last_seq}'",
        timeout=30_000)
    for shown in (page, None):  # live, then the page loaded again
        if shown is None:
            page.reload()
        axis = page.locator("#wf-axis")
        expect(axis.locator(".wf-break")).to_have_count(3)  # each wait drawn shortened
        labels = page.evaluate(AXIS_LABELS)
        ticks = [label["text"] for label in labels if label["tick"]]
        assert overlapping(labels) == [], labels
        assert ticks[0] == "0 ms" and ticks[-1].endswith(" s"), ticks  # its start and end
        # each break's label shown (none hidden for want of room here)
        assert sum(not label["tick"] for label in labels) == 3, labels
        # each break says what it left out, in words or on hover
        for mark in axis.locator(".wf-break").all():
            assert mark.get_attribute("title").endswith("left out")
        # no label is cut where it is shown
        assert page.evaluate("() => [...document.querySelectorAll('#wf-axis .wf-tick,"
                             " #wf-axis .wf-break, #wf-axis .wf-break-label')].every(e =>"
                             " e.scrollWidth <= e.clientWidth + 1)")
    no_overflow(page)
    wide = page.viewport_size["width"] >= 500
    page.locator("#trace-waterfall").scroll_into_view_if_needed()
    page.locator("#trace-waterfall").screenshot(path=str(ARTIFACTS / (
        "waterfall-shortened-waits" + ("" if wide else "-390") + ".png")))
