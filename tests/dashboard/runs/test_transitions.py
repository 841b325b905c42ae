"""The transitions contract: the ORM path and the SQL fast path leave the same run rows,
and the same status on the runs' threads (a LangGraph thread's status is a column, written
with every transition of its latest run).

Every transition (claim, recover, resume, pause, succeed, fail, cancel) is applied to two
runs in the same starting state, once through each path the engine uses, and the rows
are compared column by column. Runs on SQLite and, in make test's second pass, PostgreSQL.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from dashboard.models import Interrupt, Run, Thread
from dashboard.runs import states, store
from dashboard.runs.record import EVENT_DEFAULTS

pytestmark = pytest.mark.pg

COLUMNS = ("state", "status", "owner", "last_seq", "current_node", "output", "error_message",
           "error_traceback", "cancel_requested", "heartbeat_at", "started_at", "finished_at")


def _on_loop(executor, coro):
    return asyncio.run_coroutine_threadsafe(coro, executor._loop).result(30)


def _pair(**fields: Any) -> tuple[Run, Run]:
    """Two runs alike in every column but their ids (and thread ids), each the latest run of
    a LangGraph thread of its own whose status says otherwise (so a path that leaves it
    alone is seen)."""
    made = [Run.objects.create(graph="test.echo", thread_id=f"contract-{side}-{uuid.uuid4()}",
                               input={"steps": 1}, **fields,
                               conversation=Thread.objects.create(status="error"))
            for side in "ab"]
    return made[0], made[1]


def _row(run: Run) -> dict[str, Any]:
    run.refresh_from_db()
    assert run.conversation is not None
    return {**{name: getattr(run, name) for name in COLUMNS},
            "thread status": run.conversation.status}


def _same(orm: Run, fast: Run, *, moments: tuple[str, ...] = ()) -> dict[str, Any]:
    """Assert both rows agree; ``moments`` are stamped by each path's own clock."""
    a, b = _row(orm), _row(fast)
    for name in moments:
        assert (a[name] is None) == (b[name] is None), name
        a[name] = b[name] = "set" if a[name] is not None else None
    assert a == b
    return a


@pytest.fixture
def sink(executor):
    return _on_loop(executor, executor._aopen_saver())


def test_claiming_a_queued_run(executor, sink):
    orm, fast = _pair(configurable={"region": "Porto"}, context={"tone": "short"},
                      interrupt_before=["plan"], recursion_limit=40)
    by_orm = _on_loop(executor, store.aclaim_orm(orm.id, "exec-1", "start"))
    taken = _on_loop(executor, sink.aclaim_queued(fast.id, owner="exec-1", now=timezone.now(),
                                                  stale=timezone.now()))
    assert by_orm is not None and taken is not None
    row = _same(orm, fast, moments=("heartbeat_at", "started_at"))
    # the row the claim returns reads as the ORM reads it (Django's converters)
    read = Run.objects.get(id=fast.id)
    assert {name: getattr(taken, name) for name in (*store.RETURNED, "state", "status")} == {
        name: getattr(read, name) for name in (*store.RETURNED, "state", "status")}
    assert (row["state"], row["owner"], row["started_at"]) == ("running", "exec-1", "set")
    assert row["thread status"] == "busy"


@pytest.mark.parametrize("path", ["orm", "sql"])
def test_a_live_owner_keeps_its_run_and_a_dead_one_loses_it(executor, sink, path):
    now = timezone.now()
    live, dead = _pair(state="running", owner="other", heartbeat_at=now, started_at=now)
    Run.objects.filter(id=dead.id).update(heartbeat_at=now - timedelta(hours=1))

    def take(run: Run) -> Any:
        if path == "orm":
            return _on_loop(executor, store.aclaim_orm(run.id, "exec-2", "recover"))
        Run.objects.filter(id=run.id).update(state="queued")  # the fast path takes queued runs
        return _on_loop(executor, sink.aclaim_queued(run.id, owner="exec-2", now=now,
                                                     stale=store.stale_before(now)))

    assert take(live) is None and _row(live)["owner"] == "other"
    assert take(dead) is not None and _row(dead)["owner"] == "exec-2"
    assert _row(dead)["started_at"] == now  # a claim never moves the start


def test_recovering_a_run_of_a_dead_executor(executor, sink):
    then = timezone.now() - timedelta(hours=1)
    orm, fast = _pair(state="running", owner="dead", heartbeat_at=then, started_at=then,
                      last_seq=7, current_node="work")
    claim = _on_loop(executor, store.aclaim_orm(orm.id, "exec-3", "recover"))
    assert claim is not None and claim.kind == "run_recovered" and claim.next_seq == 8
    _on_loop(executor, sink.aapply(fast.id, store.claim(
        states.RECOVER, current="running", owner="exec-3", now=timezone.now())))
    row = _same(orm, fast, moments=("heartbeat_at",))
    assert (row["owner"], row["started_at"], row["last_seq"]) == ("exec-3", then, 7)


def test_resuming_an_answered_run(executor, sink, operator):
    then = timezone.now() - timedelta(minutes=5)
    orm, fast = _pair(state="resuming", started_at=then, last_seq=4, current_node="ask")
    Interrupt.objects.create(run=orm, interrupt_id="q", status="answered", answer="yes",
                             answered_by=operator, answered_at=timezone.now())
    claim = _on_loop(executor, store.aclaim_orm(orm.id, "exec-4", "resume"))
    assert claim is not None and claim.kind == "run_resumed"
    assert [a.answer for a in claim.answers] == ["yes"] and claim.next_seq == 5
    _on_loop(executor, sink.aapply(fast.id, store.claim(
        states.RESUME, current="resuming", owner="exec-4", now=timezone.now())))
    _same(orm, fast, moments=("heartbeat_at",))


FINALS = {
    "pause": {"status": "interrupted"},
    "succeed": {"status": "succeeded", "output": {"tam": 1.5e10, "currency": "EUR"}},
    "fail": {"status": "failed", "error": ("ValueError: ünïcode", "Traceback …"),
             "cancel_interrupts": True},
    "cancel": {"status": "cancelled", "cancel_interrupts": True},
}


@pytest.mark.parametrize("name", list(FINALS))
def test_where_an_execution_leaves_the_run(executor, sink, name):
    now = timezone.now()
    orm, fast = _pair(state="running", owner="exec-5", heartbeat_at=now, started_at=now,
                      last_seq=2, cancel_requested=(name == "cancel"))
    for run in (orm, fast):
        Interrupt.objects.create(run=run, interrupt_id="q", node="ask")
    final = FINALS[name]
    rows = [{**EVENT_DEFAULTS, "seq": 3, "kind": "custom", "created_at": now}]
    _on_loop(executor, store.awrite_orm(orm, rows, "ask", dict(final)))
    fast.refresh_from_db()
    _on_loop(executor, sink.astop(fast, [dict(r) for r in rows], current_node="ask", now=now,
                                   final=dict(final)))
    row = _same(orm, fast)
    assert (row["state"], row["owner"], row["last_seq"]) == (final["status"], "", 3)
    assert row["thread status"] == {"pause": "interrupted", "succeed": "idle",
                                    "fail": "error", "cancel": "idle"}[name]
    assert row["cancel_requested"] is False or name == "pause"
    assert (row["finished_at"] is None) == (name == "pause")
    withdrawn = {r.id: r.interrupts.get().status for r in (orm, fast)}
    assert len(set(withdrawn.values())) == 1


@pytest.mark.parametrize("name", list(FINALS))
def test_a_stop_after_a_final_state_leaves_the_run_and_its_thread(executor, sink, name):
    """A late stop (its executor's last write after an operator's cancel ended the run)
    changes neither the run nor its thread, on either path (the thread's status is one no
    stop gives, so a path that writes it is seen); a late cancel gives the thread what
    the cancelled run gives it (the statement reads the run as the stop leaves it)."""
    now = timezone.now()
    orm, fast = _pair(state="cancelled", owner="", heartbeat_at=now, started_at=now,
                      finished_at=now, last_seq=2)
    Thread.objects.filter(id__in=[orm.conversation_id, fast.conversation_id]).update(
        status="busy")
    for run in (orm, fast):  # as their executors last knew them
        run.state, run.owner = Run.State.RUNNING, "exec-6"
    _on_loop(executor, store.awrite_orm(orm, [], "ask", dict(FINALS[name])))
    _on_loop(executor, sink.astop(fast, [], current_node="ask", now=now,
                                   final=dict(FINALS[name])))
    row = _same(orm, fast)
    thread = states.meaning(Run.State.CANCELLED).thread if name == "cancel" else "busy"
    assert (row["state"], row["last_seq"], row["thread status"]) == ("cancelled", 2, thread)


def test_cancelling_an_idle_run_uses_the_final_transition(operator):
    from dashboard import services

    run = Run.objects.create(graph="test.echo", thread_id="idle-cancel", state="interrupted",
                             last_seq=5)
    services.run_cancel(run=run, user=operator)
    run.refresh_from_db()
    expected = store.finish(status="cancelled", current="interrupted", now=timezone.now(),
                            last_seq=6)
    assert (run.state, run.owner, run.last_seq, run.cancel_requested) == (
        expected["state"], expected["owner"], expected["last_seq"], False)
    assert run.finished_at is not None and run.events.get().seq == 6


@pytest.mark.parametrize("path", ["orm", "sql"])
def test_a_thread_takes_its_status_from_its_latest_run_only(executor, sink, path):
    """An older run that stops leaves the thread to its newer run; a run enqueued behind
    the one that stops keeps the thread busy."""
    now = timezone.now()
    thread = Thread.objects.create(status="busy")
    old, new = (Run.objects.create(graph="test.echo", thread_id=f"latest-{i}-{uuid.uuid4()}",
                                   state=state, heartbeat_at=now, conversation=thread)
                for i, state in enumerate(("running", "queued")))

    def stop(run: Run, status: str) -> None:
        fields = store.finish(status=status, current="running", now=timezone.now())
        if path == "orm":
            store.apply(run.id, fields)
        else:
            _on_loop(executor, sink.aapply(run.id, fields))
        thread.refresh_from_db()

    stop(old, "failed")
    assert thread.status == "busy"  # the newer run is the thread's
    queued = Run.objects.create(graph="test.echo", thread_id=f"latest-q-{uuid.uuid4()}",
                                conversation=thread, waits_for=new)
    Run.objects.filter(id=new.id).update(state="running")
    stop(new, "succeeded")
    assert thread.status == "busy"  # a run waits its turn on it
    Run.objects.filter(id=queued.id).update(waits_for=None, state="running")
    stop(queued, "failed")
    assert thread.status == "error"
