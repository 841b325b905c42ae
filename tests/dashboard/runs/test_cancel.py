"""A cancel stops the node in flight (issue 42 point 5): the run ends cancelled at once,
its thread keeps the checkpoints of its last completed step, and its log says where it
was cut (the closing event names the task, a model call in flight ends cancelled)."""

from __future__ import annotations

import time

import pytest

from dashboard import checkpoints, services
from dashboard.models import Run, RunEvent
from dashboard.runs import states
from tests.conftest import assert_gapless, wait_run, wait_started
from tests.support.processes import kill, spawn

Kind = RunEvent.Kind

pytestmark = pytest.mark.pg  # the engine: both databases (their savers and SQL differ)


def test_a_cancel_stops_the_node_in_flight_and_the_thread_keeps_its_last_step(
        executor, operator):
    # a step of 30 s: the bounded wait below ends long before it would
    run = services.run_create(graph="test.echo", input={"steps": 2, "delay": 30},
                              user=operator)
    wait_started(run)
    services.run_cancel(run=run, user=operator)
    run = wait_run(run.id, statuses=("cancelled", "succeeded", "failed"), timeout=15)
    assert run.status == Run.Status.CANCELLED and run.owner == ""
    events = assert_gapless(run)
    closing = events[-1]
    assert closing.kind == Kind.RUN_CANCELLED and closing.node == "step"
    [cut] = closing.payload["running"]
    assert cut["node"] == "step"
    assert not [e for e in events if e.kind == Kind.NODE_FINISHED]
    assert run.current_node == "step"
    # the thread's newest checkpoint is the last one the log names: no step completed
    logged = [e.checkpoint_id for e in events if e.kind == Kind.CHECKPOINT]
    newest = checkpoints.checkpoint_get(thread_id=run.thread_id)
    assert newest is not None and newest.checkpoint_id == logged[-1]
    assert newest.values.get("n", 0) == 0


def test_a_model_call_in_flight_ends_cancelled_and_nothing_follows_the_cancel(
        executor, operator, openai_server, chat_graph):
    openai_server.delay = 2.0  # the model takes its time; the run is cancelled meanwhile
    run = services.run_create(graph=chat_graph, input={"messages": [
        {"role": "user", "content": "hello"}]}, user=operator)
    deadline = time.monotonic() + 30
    while not run.events.filter(kind=Kind.MODEL_STARTED).exists():
        assert time.monotonic() < deadline, "no model call started"
        time.sleep(0.02)
    services.run_cancel(run=run, user=operator)
    run = wait_run(run.id, statuses=("cancelled", "succeeded", "failed"), timeout=15)
    assert run.status == Run.Status.CANCELLED
    events = assert_gapless(run)
    started = [e for e in events if e.kind == Kind.MODEL_STARTED]
    finished = [e for e in events if e.kind == Kind.MODEL_FINISHED]
    assert len(started) == len(finished) == 1, "the call in flight was lost"
    assert finished[0].payload["error"] == "CancelledError: the run was cancelled"
    assert finished[0].payload["call_id"] == started[0].payload["call_id"]
    assert events[-1].kind == Kind.RUN_CANCELLED
    # the model answers (its thread could not be stopped): nothing is written after the end
    while len(openai_server.requests) < 1:
        time.sleep(0.05)
    time.sleep(openai_server.delay + 0.5)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert [e.seq for e in assert_gapless(run)] == [e.seq for e in events]


@pytest.mark.postgres
@pytest.mark.server
def test_a_cancel_reaches_a_procrastinate_worker_at_once(executor, settings, operator):
    """A worker's run is cancelled from this process: its job is aborted, procrastinate's
    NOTIFY reaches the worker, which cancels the node in flight. Its heartbeat (every
    30 s here) would bring the cancel only long after the bounded wait below."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("procrastinate needs PostgreSQL: this runs in make test's PostgreSQL pass")
    settings.PLANWATCH = {**settings.PLANWATCH, "EXECUTOR": "procrastinate"}
    worker = spawn(["planwatch_worker"], "worker-cancelled", PLANWATCH_EXECUTOR="procrastinate",
                   PLANWATCH_HEARTBEAT_SECONDS="30", PLANWATCH_STALE_AFTER_SECONDS="90")
    try:
        run = services.run_create(graph="test.echo", input={"steps": 2, "delay": 60},
                                  user=operator)
        wait_started(run)
        run.refresh_from_db()
        assert run.owner and run.owner != executor.owner  # the worker holds it
        services.run_cancel(run=run, user=operator)
        run = wait_run(run.id, statuses=("cancelled", "succeeded", "failed"), timeout=15)
        assert run.status == Run.Status.CANCELLED
        events = assert_gapless(run)
        assert events[-1].kind == Kind.RUN_CANCELLED and events[-1].node == "step"
        assert events[-1].payload["by"] == operator.username
        assert worker.poll() is None  # the abort stopped the run, not the worker
    finally:
        kill(worker)


@pytest.mark.parametrize("final", ["succeeded", "failed"])
@pytest.mark.parametrize("path", ["orm", "sql"])
def test_a_cancelled_run_is_not_overwritten_by_a_late_final_write(executor, operator, path,
                                                                  final):
    """The race of a cancel and a run finishing, in its losing order: the run was left by
    its executor (a drain released it), the operator's cancel ended it at once, then the
    executor's final write arrives. The cancelled state is set once: the write (either
    path's STOP) leaves it, and its thread's status with it (the one a cancelled run gives
    its thread, not the late write's)."""
    import asyncio

    from django.utils import timezone

    from dashboard.models import Thread
    from dashboard.runs import store

    now = timezone.now()
    run = Run.objects.create(graph="test.echo", thread_id=f"race-{path}", input={"steps": 1},
                             state="running", owner="", heartbeat_at=now, started_at=now,
                             conversation=Thread.objects.create(status="busy"))
    late = Run.objects.get(id=run.id)  # as its executor last knew it: running
    services.run_cancel(run=run, user=operator)
    written = ({"status": final, "output": {"n": 1}} if final == "succeeded" else
               {"status": final, "error": ("boom", "Traceback: boom")})
    written["cancel_interrupts"] = final == "failed"
    if path == "orm":
        write = store.awrite_orm(late, [], "step", written)
    else:
        sink = asyncio.run_coroutine_threadsafe(executor._aopen_saver(), executor._loop
                                                ).result(30)
        write = sink.astop(late, [], current_node="step", now=timezone.now(), final=written)
    asyncio.run_coroutine_threadsafe(write, executor._loop).result(30)
    run.refresh_from_db()
    assert (run.status, run.output, run.error_message) == (Run.Status.CANCELLED, None, "")
    assert run.conversation.status == states.meaning(Run.State.CANCELLED).thread
    assert [e.kind for e in assert_gapless(run)][-1] == Kind.RUN_CANCELLED
    if path == "orm":  # the executor's copy does not take the status the write was refused
        assert late.state == Run.State.RUNNING
