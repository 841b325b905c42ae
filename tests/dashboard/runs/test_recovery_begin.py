"""A run taken over from an executor that stopped (cancelled, or killed) goes on from
where its graph stood: from its input when the graph had not taken it yet, never
"succeeded" on a state it did not reach (in one process: two executors, no subprocess)."""

from __future__ import annotations

import time
from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from dashboard import services
from dashboard.models import Run, RunEvent
from dashboard.runs.executor import Executor
from tests.conftest import assert_gapless, wait_run

Kind = RunEvent.Kind

pytestmark = [pytest.mark.pg]  # the savers' metadata filters and reads differ there


def left_by_a_dead_executor(run: Run) -> None:
    """What a process that claimed the run and stopped leaves: running, a stale heartbeat."""
    Run.objects.filter(id=run.id).update(state=Run.State.RUNNING, owner="gone:1:dead",
                                         heartbeat_at=timezone.now() - timedelta(hours=1))


def recover(run: Run) -> Run:
    """Another process's executor takes the run over and executes it to its end."""
    other = Executor()
    try:
        other.submit(run.id, "recover").result(60)
        # its end, read before this executor stops (once in a CI pass on PostgreSQL the run
        # still read running when the submit's future had resolved)
        return wait_run(run.id)
    finally:
        other.stop()


def queued(**create) -> Run:
    """A run stored but not dispatched (its process stopped before its executor took it)."""
    with mock.patch("dashboard.services._after_create"):
        return create.pop("make")(**create)


def test_stopped_before_its_first_checkpoint_it_starts_again_from_its_input(executor,
                                                                            operator):
    run = queued(make=services.run_create, graph="test.echo", input={"steps": 3},
                 user=operator)
    left_by_a_dead_executor(run)
    run = recover(run)
    assert run.status == Run.Status.SUCCEEDED, run.error_message  # was: EmptyInputError
    assert run.output == {"n": 3, "answer": None}
    assert Kind.RUN_RECOVERED in [e.kind for e in assert_gapless(run)]


def test_a_threads_next_run_stopped_before_its_input_takes_it(executor, operator):
    first = wait_run(services.run_create(graph="test.echo", input={"steps": 2},
                                         user=operator).id)
    assert first.output == {"n": 2, "answer": None}
    last = first.last_root_checkpoint()
    nxt = queued(make=services.run_fork, run=first, checkpoint_id=last, user=operator,
                 input={"steps": 4}, thread=first.conversation)
    left_by_a_dead_executor(nxt)  # the thread's newest checkpoint is the first run's
    nxt = recover(nxt)
    # was: "succeeded" at once with its parent's state ({"n": 2}), its input never taken
    assert nxt.status == Run.Status.SUCCEEDED, nxt.error_message
    assert nxt.output == {"n": 4, "answer": None}


def test_an_executor_stopped_inside_a_step_hands_its_run_on_whole(executor, operator):
    """Stopped after a step's update and before its conditional edge chose the next node:
    LangGraph saved the update beside the cancel, and the run taken over "succeeded" at
    once on that state (n 5 of 6, its result never written)."""
    run = services.run_create(graph="test.echo", user=operator,
                              input={"steps": 6, "route_delay": 0.4})
    deadline = time.monotonic() + 30
    while RunEvent.objects.filter(run_id=run.id, kind=Kind.NODE_STARTED).count() < 5:
        assert time.monotonic() < deadline, "the run did not progress"
        time.sleep(0.005)
    time.sleep(0.1)  # inside the fifth step's edge
    executor.stop()  # its run is cancelled, as a stopping process's runs are
    assert Run.objects.get(id=run.id).status == Run.Status.RUNNING
    Run.objects.filter(id=run.id).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    run = recover(run)
    assert run.status == Run.Status.SUCCEEDED, run.error_message
    assert run.output == {"n": 6, "answer": None}
    events = assert_gapless(run)
    steps = {e.payload["update"]["n"] for e in events
             if e.kind == Kind.NODE_FINISHED and e.node == "step"}
    assert steps == {1, 2, 3, 4, 5, 6}
