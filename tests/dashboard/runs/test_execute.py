"""The loop host (dashboard/runs/executor.py): which runs it holds, and what reaches them."""

from __future__ import annotations

import time

import pytest

from dashboard import services
from dashboard.models import Run, RunEvent
from tests.conftest import assert_gapless, wait_run, wait_started

Kind = RunEvent.Kind

pytestmark = pytest.mark.pg  # the run store's heartbeat and claims differ there


@pytest.fixture
def beating(executor, settings):
    """This process's executor, heart-beating every 0.1 s (its loop reads the interval
    when it starts: started again after the setting)."""
    from dashboard.runs.dispatch import get_executor, reset_executor

    settings.PLANWATCH = {**settings.PLANWATCH, "HEARTBEAT_SECONDS": 0.1}
    reset_executor()
    return get_executor()  # the executor fixture stops it


def test_a_recovery_dispatched_for_a_run_it_executes_leaves_that_run_its_heartbeat_and_cancel(
        beating, operator):
    """The reaper may send one of an executor's own live runs back to it (its heartbeat
    late after a stall). That dispatch's claim is refused (the run is its own, running);
    the run it executes must still be heart-beaten and reachable by a cancel. It was
    not: the refused task had put its own requests in the run's place, then removed
    them, and the run ran on unheard (found stale again every round)."""
    # long steps: no events are written inside one, only heartbeats touch heartbeat_at
    run = services.run_create(graph="test.echo", input={"steps": 3, "delay": 1.5},
                              user=operator)
    wait_started(run)

    beating.submit(run.id, "recover").result(10)  # refused: the run is this executor's

    before = Run.objects.get(id=run.id).heartbeat_at
    time.sleep(0.5)  # five heartbeats, inside the first step
    after = Run.objects.get(id=run.id)
    assert after.status == Run.Status.RUNNING and after.heartbeat_at > before, \
        "the run it executes is no longer heart-beaten"
    services.run_cancel(run=after, user=operator)
    run = wait_run(run.id, statuses=("succeeded", "failed", "cancelled"))
    assert run.status == Run.Status.CANCELLED, "the cancel never reached the running run"
    events = assert_gapless(run)
    assert Kind.RUN_RECOVERED not in [e.kind for e in events]
    # cancelled inside its first step (1.5 s long): the node in flight never finished
    assert [e.node for e in events if e.kind == Kind.NODE_FINISHED] == []
    assert events[-1].kind == Kind.RUN_CANCELLED and events[-1].node == "step"
