"""More runs than slots: the runs past them wait queued, showing their place in the line
(runs list, trace header, REST API), and start when a slot frees."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from dashboard import services
from tests.conftest import api_token, wait_run

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def one_slot(transactional_db, settings):
    """This process's executor with one slot (``PLANWATCH_MAX_CONCURRENT_RUNS=1``)."""
    import tests.graphs  # noqa: F401  (registers the test graphs)
    from dashboard.runs.dispatch import get_executor, reset_executor

    settings.PLANWATCH = {**settings.PLANWATCH, "THINK_TIME": 0.0, "MAX_CONCURRENT_RUNS": 1}
    reset_executor()
    yield get_executor()
    reset_executor()


def status_cell(html: str, run_id) -> str:
    """The text of a run's status cell in the runs list."""
    found = re.search(rf'id="run-{run_id}-status"><span[^>]*>([^<]*)</span>', html)
    assert found, f"run {run_id} is not listed"
    return found.group(1)


def test_runs_past_the_slots_wait_queued_in_line_and_start_when_a_slot_frees(
        one_slot, operator):
    busy = services.run_create(graph="test.echo", input={"steps": 1000, "delay": 0.05},
                               user=operator)
    wait_run(busy.id, statuses=("running",))
    second = services.run_create(graph="test.echo", input={"steps": 2}, user=operator)
    third = services.run_create(graph="test.echo", input={"steps": 2}, user=operator)

    browser = Client()
    browser.force_login(operator)
    listed = browser.get("/").content.decode()
    assert status_cell(listed, busy.id) == "Running"
    assert status_cell(listed, second.id) == "Queued, 1st in line"
    assert status_cell(listed, third.id) == "Queued, 2nd in line"
    trace = browser.get(f"/runs/{third.id}/").content.decode()
    assert re.search(r'id="trace-status"[^>]*>Queued, 2nd in line<', trace)

    api = Client(headers={"Authorization": f"Token {api_token(operator)}"})
    body = api.get(f"/api/runs/{third.id}/").json()
    assert (body["status"], body["queue_position"]) == ("queued", 2)
    assert api.get(f"/api/runs/{busy.id}/").json()["queue_position"] is None

    services.run_cancel(run=busy, user=operator)
    assert wait_run(third.id).status == "succeeded"  # the freed slot took them in turn
    assert wait_run(second.id).status == "succeeded"
    body = api.get(f"/api/runs/{third.id}/").json()
    assert (body["status"], body["queue_position"]) == ("succeeded", None)
