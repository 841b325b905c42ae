"""Fork one checkpoint three ways in real Chromium (three models: the scripted one and two
of the loopback OpenAI-compatible server's) and watch their comparison fill in.

The fork page's "fork several ways" form starts the forks and opens the compare page,
which polls itself until every run ended; the page is looked at (screenshots) and checked
by axe-core at 1400 and 390 px.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from playwright.sync_api import expect

from dashboard.models import Run, RunEvent
from tests.browser.conftest import (
    DESKTOP,
    PHONE,
    accessible,
    at_both_widths,
    start_run,
    watched,
)
from tests.conftest import login, served, wait_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DONE = ("succeeded", "failed", "cancelled")


@pytest.fixture
def loopback_server(openai_server, django_db_blocker):
    """A daphne of its own whose ``openai:<name>`` models are the loopback server's."""
    with served(django_db_blocker, PLANWATCH_LLM_BASE_URL=openai_server.url,
                OPENAI_API_KEY="test-key") as url:
        yield url


def test_three_forks_compared_side_by_side_at_both_widths(
        browser, loopback_server, operator):
    operator.user_permissions.add(*Permission.objects.filter(codename="fork_run"))
    base = loopback_server
    page, report = watched(browser, base)
    login(page, base, "olga", "pw-olga-1234")
    parent = start_run(page, base, "decomposition", {"goal": "Write a short market note"})
    parent = wait_run(parent.id, statuses=DONE)
    checkpoint = parent.events.filter(kind=RunEvent.Kind.CHECKPOINT, namespace="",
                                      payload__next=["plan"]).order_by("seq").first()
    page.goto(f"{base}/runs/{parent.id}/fork/?checkpoint={checkpoint.checkpoint_id}")
    form = page.locator("#fork-ways")
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        accessible(page)
    at_both_widths(page, "fork-ways-form")
    page.set_viewport_size(DESKTOP)
    form.locator("[name=w-way1_model]").fill("scripted")
    form.locator("[name=w-way2_model]").fill("openai:model-a")
    form.locator("[name=w-way2_temperature]").fill("0.2")
    form.locator("[name=w-way3_model]").fill("openai:model-b")
    form.locator("[name=w-way3_max_tokens]").fill("256")
    form.locator("#fork-ways-submit").click()
    page.wait_for_url("**/runs/compare/?runs=*")
    table = page.locator("#compare-runs")
    expect(table.locator("thead th")).to_have_count(5)  # the figure names, then 4 runs
    forks = list(Run.objects.filter(parent=parent).order_by("created_at"))
    assert [f.model_settings.get("model") for f in forks] == [
        "scripted", "openai:model-a", "openai:model-b"]
    ended = [wait_run(fork.id, statuses=DONE) for fork in forks]
    assert [f.status for f in ended] == ["succeeded"] * 3, [f.error_message for f in ended]
    # the table polls itself until every run ended: then no run is marked live
    expect(table.locator("text=live")).to_have_count(0, timeout=30_000)
    expect(table).not_to_have_attribute("hx-trigger", "every 2s")
    def row(name: str):
        return table.locator(f"tr:has(th:text-is('{name}'))")

    used = row("Models used")
    for model in ("scripted", "model-a", "model-b"):
        expect(used).to_contain_text(model)
    expect(row("Tokens")).to_contain_text("not reported")  # the scripted model's
    tokens = Run.objects.get(id=forks[1].id).total_tokens
    assert tokens and tokens % 150 == 0  # the loopback server's 150 a call
    expect(row("Tokens")).to_contain_text(str(tokens))
    calls = row("Model calls").locator("td")
    assert all(int(calls.nth(i).inner_text()) > 0 for i in range(4))
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        accessible(page)
    at_both_widths(page, "fork-compare-three")
    report()  # no console error, no failed request
