"""Sixty questions of two graphs in real Chromium, at 1400 px and laid out at 390: a compact first
screen, search and filters narrowing it, one question of twenty runs answered in one action
(each run continues once), keys moving through the rows and opening a form in place."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from dashboard import services
from dashboard.models import Interrupt, Run, RunEvent
from tests.browser.conftest import DESKTOP, PHONE, accessible, no_overflow
from tests.conftest import login, screenshot, wait_run
from tests.dashboard.inbox_support import AUDIENCE, waiting

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def shot(page, name: str) -> None:
    """The page as it stands, within the screen at 1400 and at 390 px (the steps do not
    depend on the width: they are driven once, at 1400), each screenshot whole and as the
    first screen shows it."""
    was = page.viewport_size
    for size, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        no_overflow(page)
        path = screenshot(page, f"inbox-many-{name}-{size}")
        page.screenshot(path=str(path).replace(".png", "-screen.png"))
    page.set_viewport_size(was)


def sixty(operator) -> list[Run]:
    """20 real acquisition runs waiting for a yearly price, 10 stored ones asking the same,
    30 stored decomposition runs asking for an audience: 60 questions of two graphs."""
    real = [services.run_create(graph="acquisition", input={
        "goal": f"Team bikes in Porto {i}", "region": "Germany", "currency": "EUR"},
        user=operator) for i in range(20)]
    real = [wait_run(r.id) for r in real]
    assert {r.status for r in real} == {Run.Status.INTERRUPTED}
    price = Interrupt.objects.filter(run=real[0]).get().payload
    waiting(10, price, goal="Stored price", asked_ago=timedelta(minutes=20))
    waiting(30, AUDIENCE, graph="decomposition", goal="Brief on", asked_ago=timedelta(hours=3))
    assert Interrupt.objects.filter(status="pending").count() == 60
    return real


def test_sixty_questions_searched_filtered_and_twenty_answered_at_once(
        live_server_url, page, executor, operator):
    real = sixty(operator)
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.goto(f"{live_server_url}/inbox/")
    expect(page).to_have_title("(60) Inbox · Planwatch")
    # compact: rows, not forms; the oldest question (the audience, 3 h) first
    expect(page.locator(".question.pending")).to_have_count(0)
    expect(page.locator("tr.inbox-item")).to_have_count(50)
    first = page.locator(".inbox-group").first
    expect(first.locator(".group-title")).to_contain_text("audience")
    expect(first.locator(".group-title")).to_contain_text("30 waiting")
    row_height = page.locator("tr.inbox-item").first.bounding_box()["height"]
    assert row_height < 80, row_height
    accessible(page)
    shot(page, "first")

    # the keys: j/k move through the rows, Enter opens a form in place, Escape closes it
    page.locator("body").click(position={"x": 2, "y": 2})
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    focused = page.evaluate("() => document.activeElement.getAttribute('aria-controls')")
    first_row = page.locator("a.inbox-question").first.get_attribute("aria-controls")
    assert focused == first_row
    page.keyboard.press("Enter")
    opened = page.locator(f"#{first_row}")
    expect(opened.locator(".question.pending")).to_have_count(1)
    expect(opened).to_be_visible()
    shot(page, "opened")
    page.keyboard.press("Escape")
    expect(opened).to_be_hidden()

    # filter by graph, then search for the real runs' goals: 20 rows of one question
    page.locator("select[name=graph]").select_option("acquisition")
    expect(page.locator("tr.inbox-item")).to_have_count(30)
    page.locator("input[name=q]").fill("Team bikes")
    page.locator("input[name=q]").press("Enter")
    expect(page.locator("tr.inbox-item")).to_have_count(20)
    expect(page).to_have_url(re.compile(r"q=Team(\+|%20)bikes"))
    group = page.locator(".inbox-group")
    expect(group).to_have_count(1)
    shot(page, "searched")

    # one answer, twenty runs, one action
    prefix = group.locator("input[name=prefix]").get_attribute("value")
    group.locator(".select-group").check()
    group.locator(f"[name={prefix}-answer]").fill("47.88")
    group.locator(".bulk-answer button").click()
    result = page.locator("#inbox-result")
    expect(result).to_contain_text("20 of 20 answered", timeout=20_000)
    expect(result.locator("li.ok")).to_have_count(20)
    expect(page.locator("tr.inbox-done")).to_have_count(20)
    accessible(page)
    shot(page, "answered")

    for run in real:
        done = wait_run(run.id, statuses=("succeeded", "failed", "cancelled"))
        assert done.status == Run.Status.SUCCEEDED, done.error_message
        resumed = done.events.filter(kind=RunEvent.Kind.INTERRUPT_ANSWERED).count()
        assert resumed == 1, (run.id, resumed)
    assert Interrupt.objects.filter(status="answered").count() == 20
    expect(page).to_have_title("(40) Inbox · Planwatch", timeout=20_000)
