"""Debugging a planner in real Chromium: breakpoints, stepping, a fork with an edited state.

A field-acquisition run is started from the new-run form paused before ``decide``, stepped
twice, then continued to the end; the finished run is forked from the checkpoint before
``calculate`` with a changed price, and the fork's result card shows the new TAM while
the parent's is unchanged; both trace pages draw the branch tree.
"""

from __future__ import annotations

import re
import time

import pytest
from django.contrib.auth.models import Permission
from playwright.sync_api import expect

from dashboard.models import Run, RunEvent
from planner.acquisition.presentation import format_amount
from tests.browser.conftest import at_both_widths, start_paused_before_decide
from tests.conftest import login, wait_run
from tests.support.browser import header_says

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def paused_says(page, text: str) -> None:
    expect(page.locator("#run-paused")).to_contain_text(text, timeout=30_000)


def finished_nodes(run: Run) -> int:
    return run.events.filter(kind=RunEvent.Kind.NODE_FINISHED, namespace="").count()


def paused_again(run: Run, *, nodes: int, timeout: float = 30) -> Run:
    """Wait until the run paused again after exactly ``nodes`` root nodes finished."""
    deadline = time.monotonic() + timeout
    while True:
        run.refresh_from_db()
        if run.status == Run.Status.PAUSED and finished_nodes(run) >= nodes:
            assert finished_nodes(run) == nodes, "a step ran more than one super-step"
            return run
        assert time.monotonic() < deadline, f"run still {run.status} after a step"
        time.sleep(0.05)


def test_pause_step_continue_then_fork_with_a_new_price(live_server_url, page, operator):
    """Driven at 1400 px; each page's layout is checked at 1400 and 390 px."""
    operator.user_permissions.add(*Permission.objects.filter(
        codename__in=["debug_run", "fork_run"]))
    login(page, live_server_url, "olga", "pw-olga-1234")
    run = start_paused_before_decide(page, live_server_url)

    paused_says(page, "Paused before decide")
    header_says(page, "Paused")
    # what the run waits for comes first: Continue and Step above the graph, and the
    # graph marks the node it stands before
    assert page.locator("#debug-continue").bounding_box()["y"] < \
        page.locator("#trace-graph").bounding_box()["y"]
    expect(page.locator("#trace-graph g.gnode.is-current")).to_have_attribute(
        "data-node", "decide")
    at_both_widths(page, "debug-paused")
    done = finished_nodes(wait_run(run.id, statuses=("paused",)))
    for step in (1, 2):  # one super-step each, then paused again
        page.click("#debug-step")
        run = paused_again(run, nodes=done + step)
        paused_says(page, "Paused after")
    at_both_widths(page, "debug-stepped")
    # clear the breakpoint, then continue to the end (the price question is answered)
    page.click("#debug-breakpoints-fold summary")  # folded away, out of the tab order
    page.uncheck("#debug-breakpoints input[name=interrupt_before][value=decide]")
    page.click("#debug-breakpoints button[type=submit]")
    page.wait_for_load_state()
    page.click("#debug-continue")
    price = page.locator('.question[data-field="market.price"] input')
    price.wait_for(timeout=30_000)
    price.fill("47.88")
    price.press("Enter")
    header_says(page, "Succeeded")
    parent = wait_run(run.id, statuses=("succeeded", "failed", "cancelled"))
    assert parent.status == Run.Status.SUCCEEDED, parent.error_message
    old_tam = format_amount(parent.output["tam"], "EUR")
    expect(page.locator("#trace-result .result-headline")).to_contain_text(old_tam)

    # fork from the checkpoint before calculate, with another price
    before_calc = parent.events.filter(kind=RunEvent.Kind.CHECKPOINT, namespace="",
                                       payload__next=["calculate"]).last()
    page.goto(f"{live_server_url}/runs/{parent.id}/fork/?checkpoint={before_calc.checkpoint_id}")
    # the planner declares the fields of its values: one box each, checked as its forms are
    page.locator('[name="ch_values.market.price"]').fill("60")
    at_both_widths(page, "debug-fork-form")
    page.click("#fork-submit")
    page.wait_for_url(re.compile(r".*/runs/[0-9a-f-]{36}/$"))
    child = Run.objects.get(parent=parent)
    header_says(page, "Succeeded")
    child = wait_run(child.id, statuses=("succeeded", "failed", "cancelled"))
    assert child.output["values"]["market.price"] == 60
    new_tam = format_amount(child.output["tam"], "EUR")
    assert new_tam != old_tam
    expect(page.locator("#trace-result .result-headline")).to_contain_text(new_tam)
    price = page.locator("#trace-result .result-item", has_text="Yearly price")
    expect(price).to_contain_text("60 EUR a year")
    expect(price.locator(".source")).to_have_text("edited by an operator")
    expect(page.locator("#run-branches")).to_contain_text(str(parent.id)[:8])
    at_both_widths(page, "debug-fork-result")

    page.goto(f"{live_server_url}/runs/{parent.id}/")
    expect(page.locator("#trace-result .result-headline")).to_contain_text(old_tam)
    expect(page.locator("#run-branches")).to_contain_text(str(child.id)[:8])
    page.click(f"#run-branches a[href='/runs/{parent.id}/compare/{child.id}/']")
    expect(page.locator("body")).to_contain_text("market.price")
    at_both_widths(page, "debug-compare")
