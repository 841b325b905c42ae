"""Fenced writers: a run's writes carry its claim's epoch, and once another executor's claim
moved the epoch on, an executor that lost the run writes nothing (checkpoints, events,
progress, its final status) and stops. On SQLite, and on PostgreSQL in its pass."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from django.db import connection
from django.db.models import F
from django.utils import timezone
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.constants import INTERRUPT

from dashboard import services
from dashboard.models import Run, RunEvent, Thread
from dashboard.runs import savers, store
from dashboard.runs.record import EVENT_DEFAULTS
from dashboard.runs.savers import Fence, RunLost

pytestmark = pytest.mark.pg

Kind = RunEvent.Kind


def _on_loop(executor, coro):
    return asyncio.run_coroutine_threadsafe(coro, executor._loop).result(30)


def _held_run() -> Run:
    """A running run an executor claimed (epoch 1), as that executor knows it."""
    return Run.objects.create(graph="test.echo", thread_id=f"fence-{uuid.uuid4()}",
                              input={"steps": 1}, state="running", owner="exec-a",
                              heartbeat_at=timezone.now(), started_at=timezone.now(), epoch=1,
                              conversation=Thread.objects.create(status="busy"))


def _take_over(run: Run) -> None:
    """What another executor's claim does to the run: its owner, and the epoch moved on."""
    Run.objects.filter(id=run.id).update(owner="exec-b", epoch=F("epoch") + 1,
                                         heartbeat_at=timezone.now())


def _checkpoints(thread_id: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s "
                       "ORDER BY checkpoint_id", [thread_id])
        return [row[0] for row in cursor.fetchall()]


def _writes(thread_id: str) -> int:
    table = "checkpoint_writes" if connection.vendor == "postgresql" else "writes"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table} WHERE thread_id = %s", [thread_id])
        return int(cursor.fetchone()[0])


def test_a_claim_moves_the_epoch_on(executor):
    sink = _on_loop(executor, executor._aopen_saver())
    queued = Run.objects.create(graph="test.echo", thread_id=f"fence-{uuid.uuid4()}",
                                input={"steps": 1})
    claim = _on_loop(executor, sink.aclaim(queued.id, owner="exec-a", mode="start"))
    assert claim is not None and claim.run.epoch == 1 == Run.objects.get(id=queued.id).epoch
    Run.objects.filter(id=queued.id).update(heartbeat_at=timezone.now() - timezone.timedelta(
        hours=1))
    recovered = _on_loop(executor, store.aclaim_orm(queued.id, "exec-b", "recover"))
    assert recovered is not None and recovered.run.epoch == 2
    assert Run.objects.get(id=queued.id).epoch == 2


def test_a_checkpoint_write_of_a_stale_epoch_is_refused(executor):
    run = _held_run()
    _spec, graph, _watch = _on_loop(executor, executor.agraph(
        "test.echo", fence=Fence(run.id, run.epoch)))
    saver = graph.checkpointer
    config = {"configurable": {"thread_id": run.thread_id, "checkpoint_ns": ""}}
    first = empty_checkpoint()
    saved = _on_loop(executor, saver.aput(config, first, {"source": "input", "step": -1}, {}))
    _on_loop(executor, saver.aput_writes(saved, [("n", 1)], "task-1"))
    assert _checkpoints(run.thread_id) == [first["id"]]
    assert _writes(run.thread_id) == 1

    _take_over(run)
    with pytest.raises(RunLost):
        _on_loop(executor, saver.aput(saved, empty_checkpoint(), {"source": "loop",
                                                                   "step": 0}, {}))
    with pytest.raises(RunLost):
        _on_loop(executor, saver.aput_writes(saved, [("n", 2)], "task-2"))
    assert _checkpoints(run.thread_id) == [first["id"]]  # nothing of the stale writer
    assert _writes(run.thread_id) == 1


def test_a_fenced_write_stores_what_the_savers_own_write_stores(executor, monkeypatch):
    """On PostgreSQL a fenced checkpoint (its blobs) and a task's writes go out as one
    statement each; what they store is what the saver's unfenced writes store, the last of
    two writes of one key kept as writing them one after the other keeps it."""
    statements = []
    made = savers.fenced_statement
    monkeypatch.setattr(savers, "fenced_statement", lambda calls, fence: statements.append(
        made(calls, fence)) or statements[-1])
    run = _held_run()
    fenced = _on_loop(executor, executor.agraph("test.echo", fence=Fence(run.id, run.epoch)))
    plain = _on_loop(executor, executor.agraph("test.echo"))
    stored = []
    for (_spec, graph, _watch), thread in ((fenced, run.thread_id), (plain, f"plain-{run.id}")):
        saver = graph.checkpointer
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"plan": [1, {"a": "b"}], "n": 3, "notes": {"x": [2]}}
        checkpoint["channel_versions"] = {"plan": 1, "n": 1, "notes": 1}
        saved = _on_loop(executor, saver.aput(config, checkpoint, {"source": "loop",
                                                                    "step": 0},
                                              {"plan": 1, "n": 1, "notes": 1}))
        _on_loop(executor, saver.aput_writes(saved, [("plan", [3]), ("notes", {"y": 1})],
                                             "task-1"))
        _on_loop(executor, saver.aput_writes(saved, [(INTERRUPT, "first"),
                                                     (INTERRUPT, "second")], "task-2"))
        got = _on_loop(executor, saver.aget_tuple(saved))
        stored.append((got.checkpoint["channel_values"], sorted(got.pending_writes)))
    assert stored[0] == stored[1]
    assert stored[0][0] == {"plan": [1, {"a": "b"}], "n": 3, "notes": {"x": [2]}}
    assert ("task-2", INTERRUPT, "second") in stored[0][1]
    if connection.vendor == "postgresql":  # one statement a write, none replayed
        assert len(statements) == 3 and None not in statements


def test_the_fenced_savers_copies_are_of_the_installed_savers_writes():
    """``FencedPostgresSaver.aput`` and ``aput_writes`` copy langgraph-checkpoint-postgres
    3.2's own (less the hop to a thread): a new version of them is to be copied again."""
    import hashlib
    import inspect

    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    def digest(method):
        return hashlib.sha256(inspect.getsource(method).encode()).hexdigest()[:16]

    assert (digest(AsyncPostgresSaver.aput), digest(AsyncPostgresSaver.aput_writes)) == (
        "c685c7a8c88b7431", "a2970ab04a7d7d5d")


def test_event_progress_and_final_writes_of_a_stale_epoch_are_refused(executor):
    sink = _on_loop(executor, executor._aopen_saver())
    run = _held_run()
    now = timezone.now()

    def rows(seq: int) -> list[dict]:
        return [{**EVENT_DEFAULTS, "seq": seq, "kind": "custom", "created_at": now}]

    _on_loop(executor, sink.aprogress([(run, rows(1), "step")], now=now))
    assert list(run.events.values_list("seq", flat=True)) == [1]

    _take_over(run)
    with pytest.raises(RunLost):  # alone, and beside a run still held
        _on_loop(executor, sink.aprogress([(run, rows(2), "step")], now=now))
    other = _held_run()
    with pytest.raises(RunLost):
        _on_loop(executor, sink.aprogress([(other, rows(1), "step"), (run, rows(2), "step")],
                                          now=now))
    with pytest.raises(RunLost):
        _on_loop(executor, sink.astop(run, rows(2), current_node="done", now=now,
                                      final={"status": "succeeded", "output": {"n": 1}}))
    with pytest.raises(RunLost):  # a pause, through Django's connection
        _on_loop(executor, store.awrite_orm(run, rows(2), "ask", {
            "status": "interrupted", "pending": [{"interrupt_id": "q", "node": "ask",
                                                  "namespace": "", "payload": {}}]}))
    after = Run.objects.get(id=run.id)
    assert (after.state, after.owner, after.last_seq) == ("running", "exec-b", 1)
    assert list(after.events.values_list("seq", flat=True)) == [1]
    assert not after.interrupts.exists()
    assert not other.events.exists()  # the write of both was refused together


def test_an_executor_whose_run_is_taken_over_stops_and_writes_nothing(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 400, "delay": 0.02},
                              user=operator)
    deadline = time.monotonic() + 60
    while RunEvent.objects.filter(run_id=run.id, kind=Kind.NODE_FINISHED).count() < 5:
        assert time.monotonic() < deadline, "the run did not progress"
        time.sleep(0.05)
    _take_over(run)  # as a peer's claim does while this executor still runs it
    events = RunEvent.objects.filter(run_id=run.id).count()
    checkpoints = _checkpoints(run.thread_id)
    while run.id in executor._active:  # it notices, and its execution ends by itself
        assert time.monotonic() < deadline, "the executor went on with a run it lost"
        time.sleep(0.05)
    time.sleep(0.3)  # a write still in flight would land now
    after = Run.objects.get(id=run.id)
    assert RunEvent.objects.filter(run_id=run.id).count() == events
    assert _checkpoints(run.thread_id) == checkpoints
    assert (after.state, after.owner) == ("running", "exec-b")  # left to its new owner


def test_a_checkpoint_write_abandoned_mid_transaction_is_ended_and_its_run_taken_over(
        executor, settings):
    """An executor frozen in the middle of a checkpoint write (its loop stopped after the
    fence share-locked the run's row) no longer hangs every claim of its run: the server
    ends its transaction after PLANWATCH_IDLE_TRANSACTION_SECONDS, and the run is taken
    over; the frozen write, when it goes on, finds its connection closed."""
    if connection.vendor != "postgresql":
        pytest.skip("idle_in_transaction_session_timeout is PostgreSQL's: its pass runs this")
    import psycopg

    from config.dberrors import connection_lost
    from dashboard.runs.savers import PG_FENCE, aopen_saver

    settings.PLANWATCH = {**settings.PLANWATCH, "IDLE_TRANSACTION_SECONDS": 1}
    run = _held_run()
    Run.objects.filter(id=run.id).update(heartbeat_at=timezone.now() - timezone.timedelta(
        hours=1))  # its executor is frozen: it stopped heart-beating too
    handle = _on_loop(executor, aopen_saver(pool_size=1))
    pool = handle.saver.conn

    async def abandon():
        conn = await pool.getconn()
        await conn.execute("BEGIN")  # a write's transaction, its fence taken first
        await conn.execute(PG_FENCE, [str(run.id), run.epoch])
        return conn

    frozen = _on_loop(executor, abandon())
    try:
        claim = _on_loop(executor, store.aclaim_orm(run.id, "exec-b", "recover"))
        assert claim is not None and claim.run.epoch == 2
        assert Run.objects.get(id=run.id).owner == "exec-b"
        with pytest.raises(psycopg.Error) as ended:  # the frozen write goes on: too late
            _on_loop(executor, frozen.execute("COMMIT"))
        # a dropped connection: the saver tries the write again, where the fence refuses it
        assert connection_lost(ended.value), repr(ended.value)
    finally:
        _on_loop(executor, frozen.close())  # (without the timeout: what lets the claim go)
        _on_loop(executor, pool.putconn(frozen))
        _on_loop(executor, handle.aclose())
