"""A real Chromium answers planners' questions from the inbox until the runs finish."""

from __future__ import annotations

import pytest

from dashboard import services
from dashboard.models import Interrupt, Run
from tests.conftest import login, screenshot, wait_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FINAL = ("succeeded", "failed", "cancelled")


def question(page, run: Run, field: str):
    """The question block for ``field`` in the run's inbox section, once it is there."""
    block = page.locator(f'#inbox-run-{run.id} .question[data-field="{field}"]')
    block.wait_for(state="visible", timeout=20_000)
    return block


def submit(page, run: Run) -> None:
    """Click the run's main answer button."""
    page.locator(f"#inbox-run-{run.id} .q-actions button").click()


def test_acquisition_region_currency_and_price_answered_in_the_inbox(
        live_server_url, page, executor, operator):
    run = services.run_create(graph="acquisition", input={}, user=operator)
    assert wait_run(run.id).status == Run.Status.INTERRUPTED
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.expect_status(422)  # the wrong answers below are refused with 422, on purpose
    page.goto(f"{live_server_url}/inbox/")
    assert page.locator("#nav-inbox-count").inner_text() == "1"

    region = question(page, run, "core.region")
    assert "Which region should the market be sized for?" in region.inner_text()
    screenshot(page, "inbox-region")
    assert region.locator("input").input_value() == ""  # the goal names no region
    region.locator("input").fill("Germany")
    submit(page, run)

    currency = question(page, run, "core.currency")
    currency.locator("input").fill("euro")
    submit(page, run)
    page.locator(f"#inbox-run-{run.id} .errorlist").wait_for(timeout=10_000)
    assert "'euro' is not an ISO 4217 currency code" in currency.inner_text()
    currency.locator("input").fill("eur")
    submit(page, run)

    price = question(page, run, "market.price")
    assert "EUR per year" in price.inner_text() and "From 0 to 1,000,000" in price.inner_text()
    price.locator("input").fill("2000000")
    submit(page, run)
    page.locator(f"#inbox-run-{run.id} .errorlist").wait_for(timeout=10_000)
    assert "out of range" in price.inner_text()
    screenshot(page, "inbox-price-error")
    price.locator("input").fill("47.88")
    submit(page, run)

    run = wait_run(run.id, statuses=FINAL)
    assert run.status == Run.Status.SUCCEEDED
    assert run.output["status"] == "complete" and run.output["values"]["market.price"] == 47.88
    assert run.output["region"] == "Germany" and run.output["currency"] == "EUR"
    # the run keeps its place, saying it was answered (no silent jump, no vanishing)
    page.locator(f"#inbox-run-{run.id} .inbox-closed-note",
                 has_text="Answered by olga — the run continues.").wait_for(timeout=10_000)
    assert page.locator("#inbox-table").inner_text().startswith("No question is waiting")
    answered = run.interrupts.filter(status=Interrupt.Status.ANSWERED).order_by("answered_at")
    assert [i.answer for i in answered] == ["Germany", "EUR", 47.88]
    assert all(i.answered_by == operator and i.checkpoint_id for i in answered)

    page.goto(f"{live_server_url}/runs/{run.id}/interrupts/")
    audit = page.locator("table.audit").inner_text()
    assert "Germany" in audit and "47.88" in audit and "olga" in audit
    screenshot(page, "run-interrupts-audit")


def test_decomposition_parallel_clarify_questions_answered_from_the_inbox(
        live_server_url, page, executor, operator):
    run = services.run_create(graph="decomposition",
                              input={"ask_clarifications": True, "plan_form": "lcdl_pack"},
                              user=operator)
    assert wait_run(run.id).status == Run.Status.INTERRUPTED
    assert run.interrupts.filter(status=Interrupt.Status.PENDING).count() == 2
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.goto(f"{live_server_url}/inbox/")
    assert page.locator("#inbox-table tbody tr").count() == 2
    tone = question(page, run, "6")
    audience = question(page, run, "5")
    screenshot(page, "inbox-clarify")
    tone.locator("textarea").fill("plain and friendly")
    tone.get_by_role("button", name="Answer this one").click()

    # the tone is answered; the audience question stays, alone, in the re-rendered section
    page.locator(f'#inbox-run-{run.id} .question[data-field="6"]').wait_for(
        state="detached", timeout=20_000)
    # The run resumes with the tone and pauses again on the audience: LangGraph may raise
    # that question anew (a new interrupt id), and the inbox then swaps in its form live.
    # Answer the form of the question the run now waits on, not one about to be replaced.
    tone_row = run.interrupts.get(payload__task_id="6")
    for _ in range(600):  # a deadlock guard, not a speed test
        tone_row.refresh_from_db()
        run.refresh_from_db()
        # consumed by a resume (it stamps the checkpoint) and paused again afterwards
        if tone_row.checkpoint_id and run.status != Run.Status.RUNNING:
            break
        page.wait_for_timeout(100)
    assert run.status == Run.Status.INTERRUPTED, run.status
    pending = run.interrupts.get(status=Interrupt.Status.PENDING)
    page.locator(f"#interrupt-{pending.pk}").wait_for(state="visible", timeout=20_000)
    audience = question(page, run, "5")
    audience.locator("select").select_option("residents")
    submit(page, run)

    run = wait_run(run.id, statuses=FINAL)
    assert run.status == Run.Status.SUCCEEDED, run.error_message
    answers = {i.payload["task_id"]: i.answer for i in run.interrupts.all()}
    assert answers == {"5": "residents", "6": "plain and friendly"}
    page.locator(f"#inbox-run-{run.id} .inbox-closed-note",
                 has_text="Answered by olga — the run continues.").wait_for(timeout=10_000)
    screenshot(page, "inbox-empty")


def test_a_question_takes_the_focus_only_once_its_form_is_live(
        live_server_url, page, executor, operator):
    """The focus goes to a new question when htmx has bound its form (on settle): an Enter
    typed into a form not yet bound would post it the old way and reload the page. The
    settle is slowed to 1.5 s so that a focus given on swap would be caught."""
    run = services.run_create(graph="acquisition", input={}, user=operator)
    assert wait_run(run.id).status == Run.Status.INTERRUPTED
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.add_init_script("document.addEventListener('DOMContentLoaded', () => {"
                         " htmx.config.defaultSettleDelay = 1500; });")
    page.goto(f"{live_server_url}/runs/{run.id}/")
    page.wait_for_function("() => !!document.activeElement.closest('.question')",
                           timeout=20_000)
    assert page.evaluate("() => { const f = document.activeElement.closest('form');"
                         " return !!(f && f['htmx-internal-data']"
                         " && f['htmx-internal-data'].initHash); }")


def test_a_goal_about_porto_offers_portugal_preselected(live_server_url, page, executor, operator):
    run = services.run_create(graph="acquisition", input={"goal": "e-bike rentals in Porto"},
                              user=operator)
    assert wait_run(run.id).status == Run.Status.INTERRUPTED
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.goto(f"{live_server_url}/runs/{run.id}/")
    region = page.locator('#run-interrupts .question[data-field="core.region"]')
    region.wait_for(state="visible", timeout=20_000)
    field = region.locator("input")
    assert field.input_value() == "Portugal"
    listed = page.evaluate("(id) => [...document.getElementById(id).options].map(o => o.value)",
                           field.get_attribute("list"))
    assert "Portugal" in listed and "Japan" in listed and len(listed) > 200
    screenshot(page, "question-region-from-goal")
    page.locator("#run-interrupts .q-actions button").click()
    currency = page.locator('#run-interrupts .question[data-field="core.currency"]')
    currency.wait_for(state="visible", timeout=20_000)
    assert currency.locator("input").input_value() == "EUR"
