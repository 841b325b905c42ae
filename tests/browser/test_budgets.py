"""Budgets in real Chromium: a run started from the form with a model-call budget pauses at
it, the header shows the budget reached, the debug panel asks to extend it; extended from
the page, the run goes on (to its price question). Both widths, axe-core, screenshots."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from dashboard.models import Run
from tests.browser.conftest import (
    at_both_widths,
    axe_violations,
    fill_start_form,
    submit_start_form,
)
from tests.conftest import login, wait_run
from tests.support.browser import header_says

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_run_paused_at_its_budget_is_extended_from_its_page(live_server_url, page,
                                                              operator):
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.goto(f"{live_server_url}/runs/new/?graph=acquisition")
    fill_start_form(page, {"region": "Germany", "currency": "EUR"})
    page.locator("#start-budget summary").click()
    page.fill("#start-form [name=budget-max_model_calls]", "1")
    page.fill("#start-form [name=budget-max_wall_minutes]", "60")
    page.select_option("#start-form [name=budget-on_limit]", "pause")
    run = submit_start_form(page)

    header_says(page, "Paused")
    page.reload()  # the header's budgets are drawn at page load
    expect(page.locator("#budget-paused")).to_contain_text(
        "Model calls budget of 1 reached (1 used)")
    expect(page.locator("#budget-max_model_calls")).to_contain_text("1 of 1")
    expect(page.locator("#run-paused")).to_contain_text("at its budget")
    at_both_widths(page, "budget-paused")
    assert axe_violations(page) == []

    page.fill(f"#budget-extend-by-{run.id}", "50")
    page.click(f"#budget-extend-{run.id}")
    run = wait_run(run.id)
    assert run.status in (Run.Status.INTERRUPTED, Run.Status.SUCCEEDED)  # it went on
    assert run.budget["max_model_calls"] == 51 and run.model_calls > 1
    page.goto(f"{live_server_url}/runs/{run.id}/")
    expect(page.locator("#budget-max_model_calls")).to_contain_text("of 51")
    at_both_widths(page, "budget-extended")
