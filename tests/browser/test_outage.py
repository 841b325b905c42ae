"""An outage is loud and loses nothing: the database goes away under a served Planwatch
(a proxy between the two is cut) for 10 s and for 40 s while an operator answers. The page
says so in a banner within seconds, the form keeps the answer and says it was not saved,
and once the database is back the banner goes and the answer is applied, once. A page
asked for meanwhile says in words what failed (a 503 naming the database). The run page
then shows the run's next question live: its socket, closed "try again later" while the
database was away, connects again and catches up from its last event."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from playwright.sync_api import expect

from dashboard import services
from dashboard.models import Interrupt, Run, RunEvent
from tests.browser.conftest import at_both_widths, watched
from tests.conftest import SMALL_POOLS, database_url, login, screenshot, served, wait_run
from tests.support.dbproxy import cuttable

pytestmark = [pytest.mark.browser, pytest.mark.pg, pytest.mark.postgres,
              pytest.mark.django_db(transaction=True)]


@pytest.fixture
def cut_server(django_db_blocker):
    """A served Planwatch whose database connections go through a proxy the test cuts."""
    with django_db_blocker.unblock():
        if connection.vendor != "postgresql":
            pytest.skip("a proxy cut between the server and PostgreSQL; this runs on "
                        "PostgreSQL (DATABASE_URL=postgres://…)")
        url = database_url(connection.settings_dict)
    with cuttable(url) as (proxy, through), \
            served(django_db_blocker, DATABASE_URL=through, **SMALL_POOLS) as base:
        yield proxy, base


@pytest.mark.parametrize("outage", [10, 40])
def test_an_answer_sent_while_the_database_is_down_is_kept_and_applied_once(
        browser, cut_server, executor, operator, outage):
    proxy, base = cut_server
    run = services.run_create(graph="acquisition", input={}, user=operator)
    assert wait_run(run.id).status == Run.Status.INTERRUPTED
    question = Interrupt.objects.get(run=run, status=Interrupt.Status.PENDING)
    page, report = watched(browser, base)
    page.expect_status(503)  # what the server says while its database is gone
    try:
        login(page, base, "olga", "pw-olga-1234")
        page.goto(f"{base}/runs/{run.id}/")
        region = page.locator('#run-interrupts .question[data-field="core.region"]')
        region.wait_for(state="visible", timeout=20_000)
        field = region.locator(".q-input input")
        field.fill("Germany")

        proxy.cut()
        cut_at = time.monotonic()
        page.locator("#run-interrupts .q-actions button").click()
        banner = page.locator("#outage-banner")
        expect(banner).to_contain_text("database cannot be reached", timeout=15_000)
        note = page.locator("#run-interrupts .offline-note")
        expect(note).to_contain_text("kept", timeout=15_000)
        said_within = time.monotonic() - cut_at
        assert field.input_value() == "Germany"  # kept in the form
        question.refresh_from_db()
        assert question.status == Interrupt.Status.PENDING  # nothing applied meanwhile
        at_both_widths(page, f"outage-{outage}s-answer-kept")

        # another page asked for meanwhile: a 503 that names the database, in words
        other, other_report = watched(browser, base)
        other.expect_status(503)
        other.context.add_cookies(page.context.cookies())
        response = other.goto(f"{base}/")
        assert response.status == 503
        expect(other.locator("h1")).to_contain_text("The database cannot be reached")
        at_both_widths(other, f"outage-{outage}s-503-page")

        page.wait_for_timeout(max(0.0, outage - (time.monotonic() - cut_at)) * 1000)
        proxy.mend()
        # the database is back: the banner says so and goes, the answer is sent again, once
        expect(banner).to_contain_text("Back", timeout=30_000)
        expect(page.locator("#run-interrupts .offline-note")).to_have_count(0)
        # said recorded: the answer's own flash, or (the page being live again, the run
        # moved on and redrew the questions) the answer in the answered questions
        recorded = page.locator("#run-interrupts .flash", has_text="answer recorded").or_(
            page.locator('#run-interrupts tr.audit-answered[data-answer="Germany"]'))
        expect(recorded.first).to_be_visible(timeout=30_000)
        expect(other.locator("h1")).to_have_text("Runs", timeout=30_000)  # loaded itself again
        other_report()
        question.refresh_from_db()
        assert (question.status, question.answer) == (Interrupt.Status.ANSWERED, "Germany")
        screenshot(page, f"outage-{outage}s-back")
        print(f"banner and note within {said_within:.1f} s of the cut")
        # the run goes on to its next question, and the page shows it live: its socket,
        # closed "try again later" while the database was away, connected again and caught
        # up from the last event it had (no reload)
        currency = page.locator('#run-interrupts .question[data-field="core.currency"]')
        currency.wait_for(state="visible", timeout=40_000)
        expect(page.locator("#trace-status")).to_have_text("Waiting for you")
        assert page.evaluate("() => performance.getEntriesByType('navigation').length") == 1
        # the answer was applied once (recorded as the run resumed)
        assert RunEvent.objects.filter(run=run, kind=RunEvent.Kind.INTERRUPT_ANSWERED) \
            .count() == 1
        at_both_widths(page, f"outage-{outage}s-next-question")
    finally:
        report()
