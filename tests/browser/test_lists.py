"""The operator's lists in real Chromium, at 1400 px and at 390 px: the runs list searched,
filtered by days and sorted with every filter kept in the address, a bad date named; the
inbox keeping an answered run in its place with a confirmation, its title counting."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from dashboard import services
from dashboard.models import Run
from tests.browser.conftest import DESKTOP, PHONE, no_overflow
from tests.conftest import login, screenshot, wait_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SIZES = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]
T0 = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)


def size_name(page) -> str:
    return "phone" if page.viewport_size["width"] < 600 else "desktop"


def shot(page, name: str) -> None:
    """The whole page, and what the operator sees first (the screen without scrolling)."""
    path = screenshot(page, f"lists-{name}-{size_name(page)}")
    page.screenshot(path=str(path).replace(".png", "-screen.png"))


def stored(goal: str, *, state: str = Run.State.SUCCEEDED, created: datetime = T0,
           took: float = 12.0) -> Run:
    run = Run.objects.create(graph="acquisition", thread_id=f"{uuid.uuid4()}:planner",
                             state=state, input={"goal": goal})
    Run.objects.filter(id=run.id).update(
        created_at=created, started_at=created,
        finished_at=created + timedelta(seconds=took) if state != "interrupted" else None)
    return run


def row_ids(page) -> list[str]:
    return page.locator("#run-rows tbody tr[id^=run-]").evaluate_all(
        "rows => rows.map(r => r.id.slice(4))")


@pytest.mark.parametrize("page", SIZES, indirect=True)
def test_the_runs_list_is_searched_filtered_sorted_and_kept_in_the_address(
        live_server_url, page, operator):
    porto = stored("E-bike rentals in Porto", took=600)
    porto_short = stored("Porto coffee carts", created=T0 + timedelta(days=1), took=4)
    lisbon = stored("Ferries of Lisbon", created=T0 + timedelta(days=2),
                    state=Run.State.INTERRUPTED)
    login(page, live_server_url, "olga", "pw-olga-1234")
    expect(page.locator(f"#run-{lisbon.id}-status")).to_have_text("Waiting for you")
    no_overflow(page)
    shot(page, "runs")

    # typing searches as it goes; the address follows, so a reload or a link keeps it
    page.locator("#run-filters [name=q]").fill("porto")
    expect(page).to_have_url(re.compile(r"[?&]q=porto\b"))
    expect(page.locator("#run-rows tbody tr[id^=run-]")).to_have_count(2)
    assert row_ids(page) == [str(porto_short.id), str(porto.id)]
    # the days started: the phone's date picker and the desktop's both send YYYY-MM-DD
    page.locator("#run-filters [name=since]").fill("2026-11-21")
    expect(page).to_have_url(re.compile(r"since=2026-11-21"))
    expect(page.locator("#run-rows tbody tr[id^=run-]")).to_have_count(1)
    page.locator("#run-filters [name=since]").fill("")
    expect(page.locator("#run-rows tbody tr[id^=run-]")).to_have_count(2)

    # a sort link keeps the search; longest first, then shortest first
    page.locator("#run-rows th.col-duration a").click()
    expect(page).to_have_url(re.compile(r"q=porto.*sort=-duration"))
    assert row_ids(page) == [str(porto.id), str(porto_short.id)]
    expect(page.locator(f"#run-{porto.id} .col-duration")).to_have_text("10 min 00 s")
    expect(page.locator("#run-filters [name=q]")).to_have_value("porto")
    page.locator("#run-rows th.col-duration a").click()
    expect(page).to_have_url(re.compile(r"q=porto.*sort=duration"))
    assert row_ids(page) == [str(porto_short.id), str(porto.id)]
    no_overflow(page)
    shot(page, "runs-searched")

    # a bad date in the address is named above the list; the page is not an error page
    page.expect_status(400)
    page.goto(f"{live_server_url}/?q=porto&since=2026-13-45")
    errors = page.locator("#run-filter-errors")
    expect(errors).to_contain_text("'2026-13-45' is not a date; give one as YYYY-MM-DD")
    expect(errors).to_contain_text("The list is not filtered by it.")
    expect(page.locator("#run-rows tbody tr[id^=run-]")).to_have_count(2)
    no_overflow(page)
    shot(page, "runs-bad-date")


@pytest.mark.parametrize("page", SIZES, indirect=True)
def test_an_answered_run_keeps_its_place_in_the_inbox_with_a_confirmation(
        live_server_url, page, executor, operator):
    # two runs wait for a yearly price (the goal names the region and the currency)
    first, second = (services.run_create(graph="acquisition",
                                         input={"region": "Germany", "currency": "EUR"},
                                         user=operator) for _ in range(2))
    for run in (first, second):
        assert wait_run(run.id).status == Run.Status.INTERRUPTED
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.goto(f"{live_server_url}/inbox/")
    expect(page).to_have_title("(2) Inbox · Planwatch")
    rows = page.locator("#inbox-table .inbox-question")
    expect(rows).to_have_count(2)
    expect(rows.first).not_to_contain_text("market.price")  # named by title, not by id
    no_overflow(page)
    shot(page, "inbox")

    # a summary row leads to its form
    rows.first.click()
    expect(page).to_have_url(re.compile(r"#interrupt-\d+$"))
    form = page.locator(page.url[page.url.index("#"):])
    expect(form).to_be_in_viewport()
    article = form.locator("xpath=ancestor::article")
    answered = article.get_attribute("id")
    form.locator("input").fill("47.88")
    article.locator(".q-actions button").click()

    note = page.locator(f"#{answered} .inbox-closed-note")
    expect(note).to_have_text(re.compile(r"^Answered by olga — the run continues\."),
                              timeout=20_000)
    # it stays where it was: first of the two, above the run still waiting
    order = page.locator("#inbox-runs > article").evaluate_all("a => a.map(e => e.id)")
    assert order[0] == answered and len(order) == 2, order
    expect(page).to_have_title("(1) Inbox · Planwatch", timeout=20_000)
    no_overflow(page)
    shot(page, "inbox-answered")
    done = wait_run(next(r.id for r in (first, second) if f"inbox-run-{r.id}" == answered),
                    statuses=("succeeded", "failed", "cancelled"))
    assert done.status == Run.Status.SUCCEEDED, done.error_message
