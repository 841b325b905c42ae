"""Many questions answered by keyboard, as a superuser and as a lead (both may give a
question to someone: "Give to" stands before the answer): j/k move, Enter opens a question
in place with the keyboard in its answer field, typing and Enter answer it; the answer-many
box starts empty, and the counts follow an answer to many; at 390 px the filters fold
behind one control."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from playwright.sync_api import expect

from dashboard import services
from dashboard.models import Interrupt, Run
from tests.browser.conftest import PHONE, accessible, at_both_widths, no_overflow
from tests.conftest import login, screenshot, wait_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def runs_waiting_for_a_price(operator, n: int) -> list[Run]:
    """``n`` real acquisition runs, each waiting for its yearly price (its goal names the
    currency: the form suggests it)."""
    runs = [services.run_create(graph="acquisition", input={
        "goal": f"Team bikes in Porto, in EUR {i}", "region": "Germany", "currency": "EUR"},
        user=operator) for i in range(n)]
    runs = [wait_run(r.id) for r in runs]
    assert {r.status for r in runs} == {Run.Status.INTERRUPTED}
    return runs


@pytest.fixture(params=["superuser", "lead"])
def answerer(request, django_user_model):
    """Who answers: a superuser, or a lead (answers, reads everyone's runs, gives questions
    to others)."""
    if request.param == "superuser":
        return django_user_model.objects.create_superuser(username="sue",
                                                          password="pw-sue-1234")
    lead = django_user_model.objects.create_user(username="lea", password="pw-lea-1234")
    lead.user_permissions.set(Permission.objects.filter(
        codename__in=["answer_interrupt", "assign_interrupt", "view_all_threads"]))
    return lead


def test_keys_open_a_question_and_the_typing_goes_to_its_answer(
        live_server_url, page, executor, operator, answerer):
    runs = runs_waiting_for_a_price(operator, 6)  # more than the open forms: compact rows
    name = answerer.get_username()
    login(page, live_server_url, name, f"pw-{name}-1234")
    page.goto(f"{live_server_url}/inbox/")
    expect(page.locator("tr.inbox-item")).to_have_count(6)
    prefix = page.locator(".inbox-group input[name=prefix]").get_attribute("value")
    assert page.locator(f"[name={prefix}-answer]").input_value() == ""  # no one run's answer
    page.locator("body").click(position={"x": 2, "y": 2})
    page.keyboard.press("j")
    link = page.evaluate("() => document.activeElement.getAttribute('aria-controls')")
    pk = int(link.rsplit("-", 1)[1])
    page.keyboard.press("Enter")
    opened = page.locator(f"#{link}")
    expect(opened.locator(".question.pending")).to_have_count(1)
    expect(opened.locator(".q-assign select")).to_be_visible()  # "Give to" is there, first
    answer = opened.locator(".q-input input")
    expect(answer).to_be_focused()
    page.keyboard.type("47.88")
    screenshot(page, f"inbox-keys-{name}-typed")
    page.keyboard.press("Enter")
    expect(opened).to_contain_text("recorded", timeout=20_000)
    question = Interrupt.objects.get(pk=pk)
    assert (question.status, question.answer) == (Interrupt.Status.ANSWERED, 47.88)
    run = wait_run(question.run_id, statuses=("succeeded", "failed", "cancelled"))
    assert run.status == Run.Status.SUCCEEDED
    assert len(runs) == 6


def test_an_answer_to_many_updates_the_counts_and_the_filters_fold_on_a_phone(
        live_server_url, page, executor, operator):
    runs_waiting_for_a_price(operator, 8)
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.goto(f"{live_server_url}/inbox/")
    expect(page.locator("#inbox-count")).to_have_text("8 questions waiting")
    group = page.locator(".inbox-group")
    expect(group.locator(".count")).to_have_text("8 waiting")
    prefix = group.locator("input[name=prefix]").get_attribute("value")
    box = group.locator(f"[name={prefix}-answer]")
    assert box.input_value() == ""
    for row in page.locator("tr.inbox-item input[name=interrupt]").all()[:3]:
        row.check()
    box.fill("47.88")
    group.locator(".bulk-answer button").click()
    expect(page.locator("#inbox-result")).to_contain_text("3 of 3 answered", timeout=20_000)
    expect(page.locator("#inbox-count")).to_have_text("5 questions waiting")
    expect(group.locator(".count")).to_have_text("5 waiting")
    accessible(page)
    # a phone: the first screen shows questions; the filters wait behind "Filters"
    page.set_viewport_size(PHONE)
    toggle = page.locator(".inbox-filters .filters-toggle")
    expect(toggle).to_be_visible()
    expect(page.locator(".inbox-filters select[name=sort]")).to_be_hidden()
    no_overflow(page)
    assert page.locator("tr.inbox-item").first.bounding_box()["y"] < PHONE["height"]
    cut = page.evaluate("() => [...document.querySelectorAll('#inbox .table-scroll')]"
                        ".filter(e => e.scrollWidth > e.clientWidth + 1).length")
    assert cut == 0, "a table of the inbox is cut at 390 px (it scrolls sideways)"
    at_both_widths(page, "inbox-keys-folded")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(page.locator(".inbox-filters select[name=sort]")).to_be_visible()
    screenshot(page, "inbox-keys-filters-open-phone")
    accessible(page)
