"""The run service: background execution, a gapless event log, interrupts, failures."""

from __future__ import annotations

import pytest
from django.db import connection
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from dashboard import services
from dashboard.models import Interrupt, Run, RunEvent
from dashboard.runs.savers import FencedPostgresSaver
from tests.conftest import assert_gapless, wait_run, wait_started

pytestmark = pytest.mark.pg

Kind = RunEvent.Kind


def kinds(events) -> list[str]:
    return [e.kind for e in events]


def test_a_run_executes_in_the_background_with_a_gapless_event_log(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 3}, user=operator)
    # its checkpoint thread is its thread's (a page's run's thread has the run's id)
    assert run.status == Run.Status.QUEUED and run.thread_id == str(run.conversation_id) == str(
        run.id)
    run = wait_run(run.id)
    assert run.status == Run.Status.SUCCEEDED
    assert run.output == {"n": 3, "answer": None}
    assert run.owner == "" and run.finished_at is not None
    events = assert_gapless(run)
    assert events[0].kind == Kind.RUN_STARTED and events[-1].kind == Kind.RUN_SUCCEEDED
    finished = [e for e in events if e.kind == Kind.NODE_FINISHED]
    assert [e.node for e in finished] == ["step", "step", "step", "done"]
    assert finished[0].payload["update"] == {"n": 1, "trail": ["step1"]}
    assert all(e.duration_ms is not None and e.task_id for e in finished)
    # each node's result names the checkpoint it produced: the next checkpoint event
    checkpoints = [e for e in events if e.kind == Kind.CHECKPOINT]
    assert len({c.checkpoint_id for c in checkpoints}) == len(checkpoints)
    assert run.current_node == "done"


def test_an_interrupt_pauses_the_run_and_an_answer_resumes_it(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 4, "ask": True}, user=operator)
    run = wait_run(run.id)
    assert run.status == Run.Status.INTERRUPTED
    pending = run.interrupts.get()
    assert pending.status == Interrupt.Status.PENDING
    assert pending.payload == {"field": "echo.value", "prompt": "Say something", "kind": "text"}
    assert pending.node == "ask"
    assert run.current_node == "ask"  # the node that asked, not the last checkpointed one
    raised = run.events.get(kind=Kind.INTERRUPT_RAISED)
    assert raised.payload["interrupt_id"] == pending.interrupt_id

    services.run_resume(run=run, answers={pending.interrupt_id: "hello"}, user=operator)
    run = wait_run(run.id, statuses=("succeeded", "failed", "cancelled"))
    assert run.status == Run.Status.SUCCEEDED
    assert run.output == {"n": 4, "answer": "hello"}
    pending.refresh_from_db()
    assert pending.status == Interrupt.Status.ANSWERED and pending.answered_by == operator
    assert pending.checkpoint_id  # the checkpoint the answer resumed from
    events = assert_gapless(run)
    resumed = kinds(events).index(Kind.RUN_RESUMED)
    assert events[resumed + 1].kind == Kind.INTERRUPT_ANSWERED
    assert events[resumed + 1].payload["answer"] == "hello"
    assert events[resumed + 1].payload["answered_by"] == "olga"


def test_a_node_that_raises_fails_the_run_with_the_error_stored(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 5, "fail_at": 2},
                              user=operator)
    run = wait_run(run.id)
    assert run.status == Run.Status.FAILED
    assert run.error_message == "RuntimeError: step 2 failed on purpose"
    assert "Traceback" in run.error_traceback and "on purpose" in run.error_traceback
    events = assert_gapless(run)
    failed = [e for e in events if e.kind == Kind.NODE_FAILED]
    assert len(failed) == 1 and failed[0].node == "step"
    assert failed[0].payload["error"] == "RuntimeError: step 2 failed on purpose"
    assert events[-1].kind == Kind.RUN_FAILED


def test_the_service_goes_on_after_a_failed_run(executor, operator):
    bad = services.run_create(graph="test.echo", input={"steps": 3, "fail_at": 1},
                              user=operator)
    good = services.run_create(graph="test.echo", input={"steps": 2}, user=operator)
    assert wait_run(bad.id).status == Run.Status.FAILED
    assert wait_run(good.id).status == Run.Status.SUCCEEDED


def test_twenty_concurrent_runs_all_finish_with_gapless_events(executor, operator):
    ids = [
        services.run_create(graph="test.echo", input={"steps": 6, "delay": 0.01},
                            user=operator).id
        for _ in range(20)
    ]
    for run_id in ids:
        run = wait_run(run_id, timeout=120)
        assert run.status == Run.Status.SUCCEEDED, run.error_message
        events = assert_gapless(run)
        assert [e.node for e in events if e.kind == Kind.NODE_FINISHED] == ["step"] * 6 + ["done"]


def test_cancel_stops_a_running_run_in_the_node_in_flight(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 500, "delay": 0.02},
                              user=operator)
    wait_run(run.id, statuses=("running",))
    while run.events.filter(kind=Kind.NODE_FINISHED).count() < 3:
        pass
    services.run_cancel(run=run, user=operator)
    run = wait_run(run.id, statuses=("cancelled", "succeeded", "failed"))
    assert run.status == Run.Status.CANCELLED
    events = assert_gapless(run)
    assert events[-1].kind == Kind.RUN_CANCELLED
    # who (for the card), and the node it stopped in: started, never finished
    closing = events[-1]
    assert closing.payload["by"] == "olga" and closing.payload["reason"] == "cancelled"
    assert closing.node == "step"
    [cut] = closing.payload["running"]
    assert cut["node"] == "step" and cut["namespace"] == ""
    assert not any(e.kind == Kind.NODE_FINISHED and e.task_id == cut["task_id"]
                   for e in events)
    assert any(e.kind == Kind.NODE_STARTED and e.task_id == cut["task_id"] for e in events)
    assert run.output is None
    steps = [e for e in events if e.kind == Kind.NODE_FINISHED]
    assert 3 <= len(steps) < 500


def test_cancel_an_interrupted_run_withdraws_its_question(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 4, "ask": True}, user=operator)
    run = wait_run(run.id)
    question = run.interrupts.get()
    services.run_cancel(run=run, user=operator)
    run.refresh_from_db()
    question.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert question.status == Interrupt.Status.CANCELLED
    assert assert_gapless(run)[-1].payload == {"by": "olga"}
    with pytest.raises(services.RunStateError, match="already cancelled"):
        services.run_cancel(run=run, user=operator)
    with pytest.raises(services.InterruptClosed, match="withdrawn"):
        services.interrupt_answer(interrupt=question, answer="late", user=operator)


@pytest.mark.parametrize(
    ("graph", "values", "message"),
    [
        ("nope", {}, "unknown graph 'nope'; registered graphs:"),
        ("test.echo", {"steps": "many"}, "'many' is not a whole number"),
        ("test.echo", {"steps": 0}, "out of range; use 1 to 1000"),
    ],
)
def test_bad_start_input_is_refused_and_nothing_is_stored(executor, operator, graph, values,
                                                          message):
    with pytest.raises(services.RunInputError, match=message.replace("(", r"\(")):
        services.run_create(graph=graph, input=values, user=operator)
    assert Run.objects.count() == 0


def _on_loop(executor, coro):
    import asyncio

    return asyncio.run_coroutine_threadsafe(coro, executor._loop).result(30)


def test_a_queued_run_is_claimed_once_on_the_savers_connection(executor, operator):
    from datetime import timedelta

    from django.utils import timezone

    run = Run.objects.create(graph="test.echo", thread_id="claim-once",
                             input={"steps": 2, "note": "é"}, created_by=operator)
    sink = _on_loop(executor, executor._aopen_saver())
    now = timezone.now()
    stale = now - timedelta(minutes=1)
    claimed = _on_loop(executor, sink.aclaim_queued(run.id, owner="a", now=now, stale=stale))
    assert claimed.input == {"steps": 2, "note": "é"} and claimed.graph == "test.echo"
    assert claimed.started_at == now and claimed.thread_id == "claim-once"
    # a second executor (or a second dispatch of the same job) gets nothing
    assert _on_loop(executor, sink.aclaim_queued(run.id, owner="b", now=now, stale=stale)) is None
    run.refresh_from_db()
    assert (run.status, run.owner, run.heartbeat_at, run.started_at) == (
        Run.Status.RUNNING, "a", now, now)


def test_the_final_write_ends_the_run_and_withdraws_its_questions_in_one_go(executor, operator):
    from django.utils import timezone

    from dashboard.runs import doorbells
    from dashboard.runs.record import EVENT_DEFAULTS

    run = Run.objects.create(graph="test.echo", thread_id="final-write", input={},
                             state=Run.State.RUNNING, owner="a", last_seq=3)
    question = Interrupt.objects.create(run=run, interrupt_id="q1", node="ask")
    sink = _on_loop(executor, executor._aopen_saver())
    now = timezone.now()
    rows = [{**EVENT_DEFAULTS, "seq": 4, "kind": Kind.RUN_FAILED,
             "payload": {"error": "ValueError: ünïcode"}}]
    values = _on_loop(executor, sink.astop(run, rows, current_node="ask", now=now, final={
        "status": Run.Status.FAILED, "error": ("ValueError: ünïcode", "Traceback …"),
        "cancel_interrupts": True,
    }))
    # what the runs list and the trace header redraw from, without reading the run
    assert doorbells.run_summary(values) == {
        "id": str(run.id), "graph": "test.echo", "status": "failed", "current_node": "ask",
        "last_seq": 4, "started_at": None, "finished_at": now.isoformat(),
        "error_message": "ValueError: ünïcode",
        # the outcome decided with the stop, written in the same statement
        "outcome": "failed", "outcome_reason": "ValueError: ünïcode"}
    run.refresh_from_db()
    assert (run.status, run.owner, run.last_seq, run.finished_at) == ("failed", "", 4, now)
    assert run.error_message == "ValueError: ünïcode" and run.error_traceback == "Traceback …"
    question.refresh_from_db()
    assert question.status == Interrupt.Status.CANCELLED
    event = run.events.get()
    assert (event.seq, event.payload, event.created_at) == (
        4, {"error": "ValueError: ünïcode"}, now)


def test_an_event_naming_a_checkpoint_is_written_once_the_checkpoint_can_be_read(
        executor, operator, monkeypatch):
    """With durability "async" LangGraph streams a checkpoint while the saver still writes
    it: a slow save must not let a reader of the log (a stream's ``values``, the trace's
    checkpoint link) meet a checkpoint it cannot read."""
    import asyncio

    from asgiref.sync import sync_to_async

    from dashboard import checkpoints
    from dashboard.runs import doorbells

    # (a run's fenced saver on PostgreSQL writes with its own aput)
    saver_class = (FencedPostgresSaver if connection.vendor == "postgresql"
                   else AsyncSqliteSaver)
    slow_put = saver_class.aput

    async def aput(self, *args, **kwargs):
        await asyncio.sleep(0.2)
        return await slow_put(self, *args, **kwargs)

    monkeypatch.setattr(saver_class, "aput", aput)
    readable: list[bool] = []
    ring = doorbells.RunBell.aring

    async def aring(self, events, values, committed_at):
        for event in events:
            if event["kind"] == Kind.CHECKPOINT:
                view = await sync_to_async(checkpoints.checkpoint_get, thread_sensitive=False)(
                    thread_id=str(self.run_id), checkpoint_id=event["checkpoint_id"],
                    checkpoint_ns=event["namespace"])
                readable.append(view is not None)
        await ring(self, events, values, committed_at)

    monkeypatch.setattr(doorbells.RunBell, "aring", aring)
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 3},
                                       user=operator).id)
    assert run.status == Run.Status.SUCCEEDED
    assert len(readable) == run.events.filter(kind=Kind.CHECKPOINT).count() >= 4
    assert all(readable), readable


def test_a_live_runs_heartbeat_lands_while_the_orm_thread_is_busy(transactional_db, settings,
                                                                    operator):
    """A peer may recover a run only once its executor is dead, not because the process's
    one asgiref thread (every executor and reaper ORM call queues there) is busy: through
    it the heartbeat landed late under load, a peer took the live run over, and both
    wrote seq 1 (``runevent_run_seq_unique``, the 200 streams' test on PostgreSQL)."""
    import time

    from asgiref.sync import SyncToAsync, async_to_sync

    import tests.graphs  # noqa: F401  (registers the test graphs)
    from dashboard.runs import store
    from dashboard.runs.dispatch import get_executor, reset_executor

    settings.PLANWATCH = {**settings.PLANWATCH, "THINK_TIME": 0.0, "HEARTBEAT_SECONDS": 0.1,
                          "STALE_AFTER_SECONDS": 1.0}
    reset_executor()
    try:
        get_executor()  # its heartbeat every 0.1 s
        # one long step: no event is written meanwhile, only heartbeats keep it alive
        run = services.run_create(graph="test.echo", input={"steps": 1, "delay": 4},
                                  user=operator)
        wait_started(run)
        busy = SyncToAsync.single_thread_executor.submit(time.sleep, 2.5)
        time.sleep(2.0)  # twice STALE_AFTER_SECONDS, the step still running
        # a peer's reaper and claim, as another process would run them
        assert async_to_sync(store.aclaim_orm)(run.id, "peer:1:dead", "recover") is None
        busy.result()
        run = wait_run(run.id)
        assert run.status == Run.Status.SUCCEEDED
        events = assert_gapless(run)
        assert Kind.RUN_RECOVERED not in kinds(events)
    finally:
        reset_executor()


def _descriptors() -> set[str]:
    import os

    return set(os.listdir("/proc/self/fd"))


def test_a_stopped_executor_leaves_no_descriptor_behind(transactional_db, operator, settings):
    """Its loop, the tokens' Redis client and the channel layer's connections on it close
    with it (each stopped executor used to leave five open: the test processes of the
    PostgreSQL pass ran past 1024, where select() fails)."""
    import tests.graphs  # noqa: F401  (registers the test graphs)
    from dashboard.runs.dispatch import get_executor, reset_executor

    settings.PLANWATCH = {**settings.PLANWATCH, "THINK_TIME": 0.0}
    reset_executor()
    for _ in range(2):  # the first run opens what the process keeps (its database, say)
        before = _descriptors()
        get_executor()
        run = services.run_create(graph="test.echo", input={"steps": 2}, user=operator)
        assert wait_run(run.id).status == Run.Status.SUCCEEDED
        reset_executor()
    assert _descriptors() - before == set()
