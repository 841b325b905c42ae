"""The live trace view in real Chromium: nodes light up, rows match the log, reconnects."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from dashboard.models import Run, RunEvent
from dashboard.web.presentation import trace
from tests.browser.conftest import start_run
from tests.conftest import login, screenshot
from tests.support.browser import rows_match_the_log

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Records, in the page, every node that became current and every task status shown.
WATCH = """() => {
  window.seen = {current: [], tasks: {}};
  const note = () => {
    const el = document.getElementById('trace-graph-state');
    const cur = el && el.dataset.current;
    if (cur && window.seen.current[window.seen.current.length - 1] !== cur)
      window.seen.current.push(cur);
    document.querySelectorAll('#trace-dag .task').forEach(t => {
      const s = (window.seen.tasks[t.id] ||= []);
      if (s[s.length - 1] !== t.dataset.status) s.push(t.dataset.status);
    });
  };
  new MutationObserver(note).observe(document.getElementById('trace-main'),
                                     {subtree: true, childList: true, attributes: true});
  note();
}"""
# Counts, from the page's start, the partials socket messages swapped and the announcements
# of them: each is announced once (htmx-ext-ws alone announced every element swapped so far
# again with each partial of a message: n²/2 events for n partials).
SWAPS = """() => {
  window.swaps = {partials: 0, announced: 0, again: 0};
  const seen = new WeakSet();
  document.addEventListener('htmx:oobBeforeSwap', () => window.swaps.partials++);
  document.addEventListener('htmx:oobAfterSwap', (e) => {
    window.swaps.announced++;
    // (the socket's own element is announced with each partial: htmx's settle record
    // begins with it)
    if (e.target.hasAttribute('ws-connect')) return;
    if (seen.has(e.target)) window.swaps.again++;
    seen.add(e.target);
  });
}"""


def start(page, base: str, graph: str, fields: dict[str, str]) -> Run:
    """Start a run through /runs/new/ and land on its trace page, watched (``WATCH``,
    ``SWAPS``)."""
    page.add_init_script(f"({SWAPS})()")
    run = start_run(page, base, graph, fields)
    page.wait_for_function("() => window.planwatchTrace && planwatchTrace.drawn")
    page.evaluate(WATCH)
    return run


def is_subsequence(short: list[str], long: list[str]) -> bool:
    it = iter(long)
    return all(x in it for x in short)


def root_nodes_started(run: Run) -> list[str]:
    return list(run.events.filter(kind=RunEvent.Kind.NODE_STARTED, namespace="")
                .order_by("seq").values_list("node", flat=True))


def test_an_acquisition_trace_marks_visits_decisions_and_inspects_state(
        live_server_url, page, operator):
    login(page, live_server_url, "olga", "pw-olga-1234")
    runs_list = page.context.new_page()  # a second tab on the runs list sees the run arrive
    runs_list.goto(f"{live_server_url}/")
    run = start(page, live_server_url, "acquisition",
                {"region": "Germany", "currency": "EUR", "max_iters": "6"})
    expect(runs_list.locator(f"#run-{run.id} a")).to_have_attribute("href", f"/runs/{run.id}/")
    rows_match_the_log(page, run, until=(*Run.FINISHED, Run.Status.INTERRUPTED))
    swaps = page.evaluate("window.swaps")
    assert swaps["partials"] > 3 and swaps["again"] == 0, swaps
    expect(runs_list.locator(f"#run-{run.id}-status")).to_contain_text("Waiting for you")
    screenshot(runs_list, "runs-live")
    started = root_nodes_started(run)
    for node in set(started):
        expect(page.locator(f"#node-{node}")).to_have_attribute(
            "data-visits", str(started.count(node)))
    taken, _ = trace.trace_fold(run=run)
    expect(page.locator("#trace-graph path.taken")).to_have_count(len(taken.taken))
    expect(page.locator("#trace-why tr.decision").first).to_be_visible()
    node_run = page.locator("#trace-timeline .grp.kind-node").first
    node_run.locator("> summary").click()
    node_run.locator(".kind-node_finished summary").click()
    expect(page.locator("#trace-timeline .ev-detail").first).to_contain_text("Diff against")
    page.locator("#trace-timeline .ev-detail button").first.click()
    expect(page.locator("#inspector-state")).to_contain_text('"goal"')
    screenshot(page, "trace-acquisition")


def test_a_decomposition_lights_up_live_and_survives_a_dropped_socket(
        live_server_url, page, operator):
    login(page, live_server_url, "olga", "pw-olga-1234")
    run = start(page, live_server_url, "decomposition",
                {"breadth": "14", "ask_clarifications": "on"})
    # the run waits for two answers, with the page watching; answering sets it going again
    page.fill("#run-interrupts textarea >> nth=0", "the town council")
    page.fill("#run-interrupts textarea >> nth=1", "plain and brief")
    page.click("#run-interrupts button[value=all]")
    page.wait_for_function(  # nodes light up and tasks move while the page watches
        "() => window.seen.current.length >= 3"
        " && Object.values(window.seen.tasks).some(s => s.length > 1)", timeout=20_000)
    page.evaluate("planwatchTrace.drop(800)")  # then the page's socket goes away for a while
    rows = rows_match_the_log(page, run)
    assert len(rows) == len(set(rows))
    lit, tasks = page.evaluate("window.seen.current"), page.evaluate("window.seen.tasks")
    started = root_nodes_started(run)
    assert len(lit) >= 3 and is_subsequence(lit, started), (lit, started[:20])
    assert [s for s in tasks.values() if len(s) > 1 and s[-1] == "ok"], "no live task moves"
    assert len(tasks) > 150
    expect(page.locator("#trace-dag .task.status-ok")).to_have_count(
        page.locator("#trace-dag .task").count())
    # the finished 200-task trace stays quick to load and draw
    page.reload()
    page.wait_for_function("() => planwatchTrace.drawn")
    took = page.evaluate("performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd")
    print(f"trace page of {len(tasks)} tasks: DOMContentLoaded after {took:.0f} ms")
    screenshot(page, "trace-decomposition")
    # replay: the same partials, fed from the log one event at a time (by event)
    page.click("#trace-replay-link")
    expect(page.locator("#trace-timeline [data-seq]")).to_have_count(1)
    page.click("#replay-next-event")
    expect(page.locator("#replay-at")).to_have_text("2")
    page.click("#replay-next-event")
    expect(page.locator("#trace-timeline [data-seq]")).to_have_count(3)
    expect(page.locator("#replay-at")).to_have_text("3")
