"""Two tabs on one run's two questions: an answer given in one never wipes the other's draft."""

from __future__ import annotations

import pytest

from dashboard import services
from dashboard.models import Interrupt, Run
from tests.browser.conftest import PHONE, Watch
from tests.conftest import login, screenshot, wait_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def phone_tab(browser, live_server_url):
    """A second, phone-sized tab of its own (own cookies), watched like ``page``."""
    context = browser.new_context(viewport=PHONE)
    tab = context.new_page()
    watch = Watch(live_server_url)
    watch.attach(tab)
    yield tab
    context.close()
    assert not watch.problems, "the second tab saw problems:\n" + "\n".join(watch.problems)


def test_an_answer_in_one_tab_keeps_the_text_typed_in_the_other(
        live_server_url, page, phone_tab, executor, operator):
    run = services.run_create(graph="decomposition",
                              input={"ask_clarifications": True, "plan_form": "lcdl_pack"},
                              user=operator)
    assert wait_run(run.id).status == Run.Status.INTERRUPTED
    assert run.interrupts.filter(status=Interrupt.Status.PENDING).count() == 2
    for tab in (page, phone_tab):
        login(tab, live_server_url, "olga", "pw-olga-1234")
        tab.goto(f"{live_server_url}/runs/{run.id}/")
    tone_b = phone_tab.locator('#run-interrupts .question[data-field="6"] textarea')
    tone_b.wait_for(state="visible", timeout=20_000)
    tone_b.fill("plain and friendly, no jar")
    phone_tab.evaluate("() => { document.querySelector('.question[data-field=\"6\"]')"
                       ".dataset.mark = 'kept'; }")

    audience_a = page.locator('#run-interrupts .question[data-field="5"]')
    audience_a.wait_for(state="visible", timeout=20_000)
    audience_a.locator("select").select_option("residents")
    audience_a.get_by_role("button", name="Answer this one").click()

    # tab B learns of the answer live: in place of the question, who answered what
    note = phone_tab.locator("#run-interrupts .q-elsewhere")
    note.wait_for(state="visible", timeout=20_000)
    assert note.inner_text() == "Answered by olga: residents"
    # the run resumed and waits on the tone again; tab B's draft is still there
    tone_row = run.interrupts.get(payload__task_id="6")
    for _ in range(600):  # a deadlock guard, not a speed test
        run.refresh_from_db()
        tone_row.refresh_from_db()
        if run.status == Run.Status.INTERRUPTED and run.interrupts.filter(
                status=Interrupt.Status.ANSWERED).exists() and not run.interrupts.filter(
                status=Interrupt.Status.PENDING, payload__task_id="5").exists():
            break
        phone_tab.wait_for_timeout(100)
    pending = run.interrupts.get(status=Interrupt.Status.PENDING)
    phone_tab.locator(f"#interrupt-{pending.pk}").wait_for(state="visible", timeout=20_000)
    phone_tab.wait_for_timeout(500)  # let any late refresh land: it must not wipe the draft
    assert tone_b.input_value() == "plain and friendly, no jar"
    assert phone_tab.locator("#run-interrupts .q-elsewhere").inner_text() \
        == "Answered by olga: residents"
    screenshot(phone_tab, "drafts-tab-b-phone")
    screenshot(page, "drafts-tab-a-desktop")

    phone_tab.locator("#run-interrupts .q-actions button").click()
    run = wait_run(run.id, statuses=("succeeded", "failed", "cancelled"))
    answers = {i.payload["task_id"]: i.answer for i in run.interrupts.filter(
        status=Interrupt.Status.ANSWERED)}
    assert answers == {"5": "residents", "6": "plain and friendly, no jar"}
