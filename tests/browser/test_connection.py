"""The connection is part of the truth: the trace page says when it is not live, keeps an
answer given meanwhile and sends it once when the server is back, and says it is live."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from dashboard import services
from dashboard.models import Interrupt, Run
from tests.conftest import SMALL_POOLS, free_port, login, screenshot, served, wait_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_answer_given_while_the_server_is_down_is_kept_and_sent_once_when_it_is_back(
        django_db_blocker, browser, executor, operator):
    run = services.run_create(graph="acquisition", input={}, user=operator)
    assert wait_run(run.id).status == Run.Status.INTERRUPTED
    port = free_port()
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    try:
        with served(django_db_blocker, port=port, **SMALL_POOLS) as url:
            login(page, url, "olga", "pw-olga-1234")
            page.goto(f"{url}/runs/{run.id}/")
            region = page.locator('#run-interrupts .question[data-field="core.region"]')
            region.wait_for(state="visible", timeout=20_000)
            page.wait_for_function("() => document.querySelector('#trace-main') &&"
                                   " !document.body.classList.contains('is-offline')")
            page.wait_for_timeout(500)  # the socket is open
        # the server is gone: the page says so, its clocks stop
        banner = page.locator("#live-banner")
        expect(banner).to_contain_text("Reconnecting", timeout=15_000)
        waiting = page.locator("#trace-waiting").inner_text()
        page.wait_for_timeout(2200)
        assert page.locator("#trace-waiting").inner_text() == waiting  # stopped
        region.locator("input").fill("Germany")
        page.locator("#run-interrupts .q-actions button").click()
        note = page.locator("#run-interrupts .offline-note")
        expect(note).to_contain_text("Not sent", timeout=10_000)
        assert region.locator("input").input_value() == "Germany"  # kept in the form
        screenshot(page, "trace-offline-answer-kept")
        question = Interrupt.objects.get(run=run, status=Interrupt.Status.PENDING)
        with served(django_db_blocker, port=port, **SMALL_POOLS):
            expect(banner).to_contain_text("Live again", timeout=30_000)
            # sent once when the socket is back: that question answered, the next one asked
            currency = page.locator('#run-interrupts .question[data-field="core.currency"]')
            currency.wait_for(state="visible", timeout=30_000)
            question.refresh_from_db()
            assert (question.status, question.answer) == (Interrupt.Status.ANSWERED,
                                                           "Germany")
            assert Interrupt.objects.filter(run=run, status=Interrupt.Status.ANSWERED).count() \
                == 1
            assert page.locator("#run-interrupts .offline-note").count() == 0
            screenshot(page, "trace-live-again")
    finally:
        context.close()
