"""Every page passes axe-core (no serious or critical violation) at 1400 and 390 px.

Runs of both planner graphs are put in each state a run page can show (running, waiting
for an answer, paused at a breakpoint, finished), then every page is visited at both
widths: login, runs list, new run, each run page, inbox, compare, fork, crons.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission

from dashboard.models import Run, RunEvent
from tests.browser.conftest import DESKTOP, PHONE, axe_violations, no_overflow, watched
from tests.conftest import login, screenshot, served, wait_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAITING = (*Run.FINISHED, Run.Status.INTERRUPTED, Run.Status.PAUSED)


def start(page, base: str, graph: str, fields: dict[str, str],
          before: tuple[str, ...] = ()) -> Run:
    """Start ``graph`` through the new-run form (with breakpoints ``before``)."""
    page.goto(f"{base}/runs/new/?graph={graph}")
    for name, value in fields.items():
        field = page.locator(f"#start-form [name={name}]")
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        elif field.get_attribute("type") == "checkbox":
            field.check()
        else:
            field.fill(value)
    if before:
        page.locator("#start-form details.start-breakpoints summary").click()
        for node in before:
            page.check(f"#start-form input[name=bp-interrupt_before][value={node}]")
    page.click("#start-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/[0-9a-f-]{36}/$"))
    return Run.objects.get(id=page.url.rstrip("/").rsplit("/", 1)[1])


def visit(page, url: str, name: str, found: list[str]) -> None:
    """Open ``url`` at both widths; collect axe's findings; screenshot each."""
    for size, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        page.goto(url)
        page.wait_for_load_state("networkidle")
        found.extend(axe_violations(page))
        no_overflow(page)
        screenshot(page, f"a11y-{name}-{size}")


def test_every_page_has_no_serious_axe_violation(live_server_url, page, operator, browser,
                                                 django_db_blocker):
    operator.user_permissions.add(*Permission.objects.filter(
        codename__in=["debug_run", "fork_run"]))
    base = live_server_url
    found: list[str] = []
    visit(page, f"{base}/accounts/login/", "login", found)
    login(page, base, "olga", "pw-olga-1234")

    # a server whose model never answers keeps its runs running
    with served(django_db_blocker, PLANWATCH_LLM="tests.hanging_llm:model") as slow:
        there, report = watched(browser, slow)
        login(there, slow, "olga", "pw-olga-1234")
        running = {
            "acquisition": start(there, slow, "acquisition",
                                 {"region": "Germany", "currency": "EUR"}),
            "decomposition": start(there, slow, "decomposition", {"breadth": "6"}),
        }
        for graph, run in running.items():
            wait_run(run.id, statuses=(Run.Status.RUNNING,))
            visit(there, f"{slow}/runs/{run.id}/", f"{graph}-running", found)
            there.once("dialog", lambda dialog: dialog.accept())
            with there.expect_response(re.compile(r".*/cancel/$")):
                there.locator("#trace-cancel").click()
        report()

    waiting = {
        "acquisition": start(page, base, "acquisition", {"max_iters": "8"}),
        "decomposition": start(page, base, "decomposition",
                               {"breadth": "8", "ask_clarifications": "on"}),
    }
    paused = {
        "acquisition": start(page, base, "acquisition",
                             {"region": "Germany", "currency": "EUR"}, before=("decide",)),
        "decomposition": start(page, base, "decomposition", {"breadth": "8"},
                               before=("join",)),
    }
    finished = {"acquisition": start(page, base, "acquisition",
                                     {"region": "Germany", "currency": "EUR"})}
    price = page.locator('.question[data-field="market.price"] input')
    price.fill("47.88")
    price.press("Enter")
    finished["decomposition"] = start(page, base, "decomposition", {"breadth": "14"})
    for states, status in ((waiting, "interrupted"), (paused, "paused"),
                           (finished, "succeeded")):
        for graph, run in states.items():
            run = wait_run(run.id, statuses=WAITING)
            assert run.status == status, (graph, run.status, run.error_message)
            visit(page, f"{base}/runs/{run.id}/", f"{graph}-{status}", found)

    done = finished["acquisition"]
    checkpoint = done.events.filter(kind=RunEvent.Kind.CHECKPOINT, namespace="").last()
    for path, name in (
            ("/", "runs"), ("/runs/new/", "new-acquisition"),
            ("/runs/new/?graph=decomposition", "new-decomposition"), ("/inbox/", "inbox"),
            ("/crons/", "crons"),
            (f"/runs/{done.id}/compare/{waiting['acquisition'].id}/", "compare"),
            (f"/runs/{done.id}/fork/?checkpoint={checkpoint.checkpoint_id}", "fork"),
            (f"/runs/{done.id}/?at=3", "replay")):
        visit(page, f"{base}{path}", name, found)
    assert not found, "axe-core found:\n" + "\n".join(found)
