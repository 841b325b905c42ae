"""Live figures move with the run: the header counts model calls, tokens and cost while a
decomposition runs (the same figures the finished header shows); a question's age ticks;
a waiting run's waterfall grows between events, its axis labelled at round, evenly spaced
times that never overlap, at 1400 and at 390 px."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest
from playwright.sync_api import expect

from dashboard import services
from dashboard.models import Run
from tests.browser.conftest import at_both_widths, start_run, watched
from tests.conftest import SMALL_POOLS, login, served, wait_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CALLS = "() => { const b = document.querySelector('#trace-model b');" \
        " return b ? parseInt(b.textContent, 10) : 0; }"
STATUS = "() => document.getElementById('trace-status').textContent.trim()"
TICKS = """() => [...document.querySelectorAll('#wf-axis .wf-tick')].map(t => {
  const r = t.getBoundingClientRect(); return [t.textContent, r.left, r.right]; })"""


@pytest.fixture
def slow_server(django_db_blocker):
    """A served Planwatch whose scripted model thinks 0.3 s a call: a run lasts seconds."""
    with served(django_db_blocker, PLANWATCH_THINK_TIME="0.3", **SMALL_POOLS) as base:
        yield base


def test_the_header_counts_model_calls_tokens_and_cost_while_the_run_runs(
        browser, slow_server, operator):
    page, report = watched(browser, slow_server)
    try:
        login(page, slow_server, "olga", "pw-olga-1234")
        run = start_run(page, slow_server, "decomposition", {"breadth": "6"})
        page.wait_for_function(f"() => ({CALLS})() >= 2", timeout=30_000)
        first = page.evaluate(CALLS)
        assert page.evaluate(STATUS) == "Running"  # counted while it runs, not at its end
        expect(page.locator("#trace-tokens")).to_be_visible()
        expect(page.locator("#trace-cost")).to_be_visible()
        page.wait_for_function(f"() => ({CALLS})() > {first}", timeout=30_000)
        at_both_widths(page, "live-header-running")
        run = wait_run(run.id, statuses=("succeeded", "failed", "cancelled"), timeout=120)
        # the last live figure is the finished header's, from the run's one rollup
        expect(page.locator("#trace-model b")).to_have_text(str(run.model_calls),
                                                            timeout=20_000)
        page.reload()
        expect(page.locator("#trace-model b")).to_have_text(str(run.model_calls))
    finally:
        report()


def test_a_waiting_runs_waterfall_and_question_age_grow(browser, slow_server, operator):
    page, report = watched(browser, slow_server)
    try:
        login(page, slow_server, "olga", "pw-olga-1234")
        run = start_run(page, slow_server, "acquisition", {"currency": "EUR"})
        assert wait_run(run.id).status == Run.Status.INTERRUPTED
        age = page.locator("#run-interrupts .q-meta [data-since]")
        age.wait_for(timeout=20_000)
        shown = page.evaluate("() => getComputedStyle(document.getElementById("
                              "'trace-waterfall')).getPropertyValue('--wf-shown')")
        asked = age.inner_text()
        page.wait_for_timeout(4500)
        assert age.inner_text() != asked  # "asked 0 s ago" ticks
        grown = page.evaluate("() => getComputedStyle(document.getElementById("
                              "'trace-waterfall')).getPropertyValue('--wf-shown')")
        assert float(grown) > float(shown)  # the axis grew with the open wait, no event came
        expect(page.locator("#wf-rows .wf-bar.wf-human.wf-open")).to_have_count(1)
        page.locator("#trace-waterfall").scroll_into_view_if_needed()
        for width in (1400, 390):
            page.set_viewport_size({"width": width, "height": 900})
            ticks = page.evaluate(TICKS)
            assert len(ticks) >= 3, ticks
            for (a, _, a_right), (b, b_left, _) in pairwise(ticks):
                assert a_right <= b_left + 0.5, f"{a!r} overlaps {b!r} at {width} px: {ticks}"
            lefts = [left for _, left, _ in ticks[:-1]]
            gaps = {round(b - a) for a, b in pairwise(lefts)}
            assert max(gaps) - min(gaps) <= 2, (width, ticks)  # evenly spaced
            assert all(re.fullmatch(r"0 ms|\d+(\.\d+)? m?s|\d+ min \d\d s", t)
                       for t, _, _ in ticks), ticks
        page.set_viewport_size({"width": 1400, "height": 900})
        at_both_widths(page, "live-waterfall-waiting")
        services.run_cancel(run=Run.objects.get(id=run.id), user=operator)
    finally:
        report()
