"""Every page passes axe-core (no serious or critical violation) at 1400 and 390 px.

Runs of both planner graphs are put in each state a run page can show (running, waiting
for an answer, paused at a breakpoint, finished), then every page is visited at both
widths: login, runs list, new run, each run page, inbox, compare, fork, crons, replay and
the API reference (Redoc).
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from playwright.sync_api import expect

from dashboard.models import Run, RunEvent
from tests.browser.conftest import (
    DESKTOP,
    PHONE,
    axe_violations,
    no_overflow,
    start_run,
    watched,
)
from tests.conftest import ARTIFACTS, login, screenshot, served, wait_run

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAITING = (*Run.FINISHED, Run.Status.INTERRUPTED, Run.Status.PAUSED)


def visit(page, url: str, name: str, found: list[str]) -> None:
    """Open ``url`` at both widths; collect axe's findings; screenshot each."""
    for size, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        page.goto(url)
        page.wait_for_load_state("networkidle")
        found.extend(axe_violations(page))
        no_overflow(page)
        screenshot(page, f"a11y-{name}-{size}")
        for part in ("waterfall", "dag"):  # the trace's waterfall and DAG alone, each width
            box = page.locator(f"#trace-{part}")
            if box.count() and box.is_visible():
                box.screenshot(path=str(ARTIFACTS / f"a11y-{name}-{size}-{part}.png"))


# Three tests (not one) so that the browser pass's two workers share the pages: each starts
# the runs its pages need.

def test_pages_of_no_run_have_no_serious_axe_violation(live_server_url, page, operator):
    base = live_server_url
    found: list[str] = []
    visit(page, f"{base}/accounts/login/", "login", found)
    login(page, base, "olga", "pw-olga-1234")
    for path, name in (
            ("/", "runs"), ("/runs/new/", "new-acquisition"),
            ("/runs/new/?graph=decomposition", "new-decomposition"), ("/inbox/", "inbox"),
            ("/inbox/history/", "history"), ("/crons/", "crons")):
        visit(page, f"{base}{path}", name, found)
    # the API reference is Planwatch's own Redoc page (Swagger UI at /api/docs/ is the
    # sidecar's as shipped, and is not checked here)
    for size, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        page.goto(f"{base}/api/redoc/")
        expect(page.locator("#redoc-container h1").first).to_contain_text(
            "Planwatch API", timeout=20_000)
        found.extend(axe_violations(page))
        screenshot(page, f"a11y-redoc-{size}")
    assert not found, "axe-core found:\n" + "\n".join(found)


def test_running_runs_pages_have_no_serious_axe_violation(operator, browser, django_db_blocker):
    found: list[str] = []
    # a server whose model never answers keeps its runs running
    with served(django_db_blocker, PLANWATCH_LLM="tests.hanging_llm:model") as slow:
        there, report = watched(browser, slow)
        login(there, slow, "olga", "pw-olga-1234")
        running = {
            "acquisition": start_run(there, slow, "acquisition",
                                 {"region": "Germany", "currency": "EUR"}),
            "decomposition": start_run(there, slow, "decomposition", {"breadth": "6"}),
        }
        for graph, run in running.items():
            wait_run(run.id, statuses=(Run.Status.RUNNING,))
            visit(there, f"{slow}/runs/{run.id}/", f"{graph}-running", found)
            there.once("dialog", lambda dialog: dialog.accept())
            with there.expect_response(re.compile(r".*/cancel/$")):
                there.locator("#trace-cancel").click()
        report()
    assert not found, "axe-core found:\n" + "\n".join(found)


def test_pages_of_runs_waiting_paused_and_finished_have_no_serious_axe_violation(
        live_server_url, page, operator):
    operator.user_permissions.add(*Permission.objects.filter(
        codename__in=["debug_run", "fork_run"]))
    base = live_server_url
    found: list[str] = []
    login(page, base, "olga", "pw-olga-1234")
    waiting = {
        "acquisition": start_run(page, base, "acquisition", {"max_iters": "8"}),
        "decomposition": start_run(page, base, "decomposition",
                               {"breadth": "8", "ask_clarifications": "on"}),
    }
    paused = {
        "acquisition": start_run(page, base, "acquisition",
                             {"region": "Germany", "currency": "EUR"}, before=("decide",)),
        "decomposition": start_run(page, base, "decomposition", {"breadth": "8"},
                               before=("join",)),
    }
    finished = {"acquisition": start_run(page, base, "acquisition",
                                     {"region": "Germany", "currency": "EUR"})}
    price = page.locator('.question[data-field="market.price"] input')
    price.fill("47.88")
    price.press("Enter")
    # a small plan: the same templates as a 215-task one (whose layout and axe-core check
    # are test_waterfall's), at a tenth of axe-core's time (21 s a width for 215 tasks)
    finished["decomposition"] = start_run(page, base, "decomposition", {"breadth": "4"})
    for states, status in ((waiting, "interrupted"), (paused, "paused"),
                           (finished, "succeeded")):
        for graph, run in states.items():
            run = wait_run(run.id, statuses=WAITING)
            assert run.status == status, (graph, run.status, run.error_message)
            visit(page, f"{base}/runs/{run.id}/", f"{graph}-{status}", found)

    done = finished["acquisition"]
    checkpoint = done.events.filter(kind=RunEvent.Kind.CHECKPOINT, namespace="").last()
    for path, name in (
            ("/", "runs-listed"), ("/inbox/", "inbox-asking"),
            (f"/runs/{done.id}/compare/{waiting['acquisition'].id}/", "compare"),
            (f"/runs/{done.id}/fork/?checkpoint={checkpoint.checkpoint_id}", "fork"),
            (f"/runs/{done.id}/?at=3", "replay")):
        visit(page, f"{base}{path}", name, found)
    assert not found, "axe-core found:\n" + "\n".join(found)


TAB_STOP = ("() => { const a = document.activeElement;"
            " return [a.tagName, a.id, a.className, a.getAttribute('name') || '',"
            " (a.textContent || '').trim().slice(0, 40)]; }")


def test_the_keyboard_skips_to_content_past_folded_breakpoints_to_the_graph(
        live_server_url, page, operator):
    operator.user_permissions.add(*Permission.objects.filter(codename="debug_run"))
    login(page, live_server_url, "olga", "pw-olga-1234")
    # the first Tab on a page offers the skip link, which lands in <main>
    page.goto(f"{live_server_url}/inbox/")
    page.keyboard.press("Tab")
    assert page.evaluate(TAB_STOP)[4] == "Skip to content"
    screenshot(page, "a11y-skip-link")
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "content"
    run = start_run(page, live_server_url, "acquisition", {"max_iters": "8"})
    wait_run(run.id, statuses=WAITING)
    page.goto(f"{live_server_url}/runs/{run.id}/")
    page.locator("#run-interrupts .question").first.wait_for()
    # from Answer, the keys reach the graph picture and the timeline without passing one
    # breakpoint checkbox: they are folded under "Breakpoints"
    page.locator("#run-interrupts button.primary").focus()
    stops = []
    for _ in range(40):
        page.keyboard.press("Tab")
        stops.append(page.evaluate(TAB_STOP))
        if stops[-1][1] == "trace-timeline":
            break
    names = [s[3] for s in stops]
    assert "interrupt_before" not in names and "interrupt_after" not in names, stops
    assert stops[-1][1] == "trace-timeline", stops
    assert any(s[2] == "graph-canvas" for s in stops), stops
    expect(page.locator("#debug-breakpoints-fold")).not_to_have_attribute("open", "")
    graph = page.locator("#trace-graph .graph-canvas")
    expect(graph).to_have_attribute("role", "img")
    expect(graph).to_have_attribute("aria-label", re.compile(r"current node ask_user"))
    graph.focus()
    no_overflow(page)
    screenshot(page, "a11y-keyboard-graph-focused")


def test_without_javascript_a_question_is_answered_by_a_plain_form_post(
        live_server_url, browser, operator):
    base = live_server_url
    for size, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page, report = watched(browser, base, viewport, java_script_enabled=False)
        login(page, base, "olga", "pw-olga-1234")
        run = start_run(page, base, "acquisition", {"region": "Germany", "currency": "EUR"})
        run = wait_run(run.id, statuses=WAITING)
        assert run.status == Run.Status.INTERRUPTED, run.status
        page.goto(f"{base}/runs/{run.id}/")
        # the page says what needs JavaScript, and still shows the graph and the question
        expect(page.locator("#trace-noscript")).to_contain_text("does not update live")
        expect(page.locator("#trace-graph .graph-outline li.is-current")).to_contain_text(
            "ask_user")
        price = page.locator('#run-interrupts .question[data-field="market.price"] input')
        expect(price).to_be_visible()
        no_overflow(page)
        screenshot(page, f"a11y-nojs-question-{size}")
        price.fill("47.88")
        page.locator("#run-interrupts button.primary").click()
        # a normal post, answered by a redirect back to the run with a confirmation
        page.wait_for_url(f"{base}/runs/{run.id}/")
        expect(page.locator(".messages")).to_contain_text("1 answer recorded")
        run = wait_run(run.id)
        assert run.status == Run.Status.SUCCEEDED, run.error_message
        assert run.interrupts.get().answer == 47.88
        page.reload()
        expect(page.locator("#trace-result")).to_contain_text("TAM")
        screenshot(page, f"a11y-nojs-answered-{size}")
        report()
