"""Run transitions: every change of a run's status, owner, seq and final fields is decided here.

A transition is a function that returns the *fields* a run takes (a plain dict of column
values). Two paths apply them and neither adds a field of its own: the ORM
(:func:`orm_update`, used by services and the executor's slower paths) and the executor's
SQL fast path (:meth:`dashboard.runs.sink.EventSink.set_clause`). The contract test runs
every transition through both paths on both databases and compares the rows.

The event log and ``Run.last_seq`` are always written in one statement or transaction, so
the next seq of a run is ``last_seq + 1`` (:func:`next_seq`), read nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from dashboard.models import Run, RunEvent, Thread
from dashboard.runs.conf import planwatch_setting

Fields = dict[str, Any]
"""Column values of a run, as a transition sets them."""

Status = Run.Status


@dataclass(frozen=True)
class FirstSet:
    """A value a column takes only if it has none yet (``COALESCE(column, value)``)."""

    value: Any


# -- conditions ------------------------------------------------------------------------


def stale_before(now: datetime) -> datetime:
    """Heartbeats older than this belong to a dead executor."""
    return now - timedelta(seconds=planwatch_setting("STALE_AFTER_SECONDS"))


def free_q(*, owner: str, stale: datetime) -> Q:
    """ORM form of "nobody else holds the run": no owner, ``owner`` itself, or a dead one."""
    return Q(owner="") | Q(owner=owner) | Q(heartbeat_at__lt=stale)


FREE_SQL = "(owner = '' OR owner = {mark} OR heartbeat_at < {mark})"
"""SQL form of :func:`free_q` (parameters: owner, stale), for the fast path."""


def next_seq(run: Run) -> int:
    """The seq the run's next event takes (events and ``last_seq`` are written together)."""
    return run.last_seq + 1


# -- transitions -----------------------------------------------------------------------


def claim(*, owner: str, now: datetime) -> Fields:
    """An executor takes the run (start, resume or recover): it is running and heart-beats.

    It reads the breakpoints as they are now, so an earlier change needs no applying.
    """
    return {"status": Status.RUNNING, "owner": owner, "heartbeat_at": now,
            "started_at": FirstSet(now), "breakpoints_changed": False}


def heartbeat(*, now: datetime) -> Fields:
    """The executor that holds the run is alive."""
    return {"heartbeat_at": now}


def progress(*, now: datetime, last_seq: int | None = None, current_node: str = "",
             calls: Fields | None = None) -> Fields:
    """Events were written: the run's last seq, the node it is in and its model rollups
    (``calls``, from :func:`rollups`) move on."""
    fields: Fields = {"heartbeat_at": now}
    if last_seq is not None:
        fields["last_seq"] = last_seq
    if current_node:
        fields["current_node"] = current_node
    if calls:
        fields.update(calls)
    return fields


ROLLUPS = ("model_calls", "input_tokens", "output_tokens", "total_tokens", "cost_usd")
"""The run's model-call rollups, written with the events that moved them."""


def model_call(run: Run, *, usage: dict[str, Any] | None, cost: float | None) -> Fields:
    """A model call finished: it counts, and its reported tokens and known cost add up.

    A rollup stays null (not reported / unknown) until some call reports it.
    """
    def add(total: Any, part: Any) -> Any:
        if part is None:
            return total
        return part if total is None else total + part

    usage = usage or {}
    return {"model_calls": run.model_calls + 1,
            "input_tokens": add(run.input_tokens, usage.get("input_tokens")),
            "output_tokens": add(run.output_tokens, usage.get("output_tokens")),
            "total_tokens": add(run.total_tokens, usage.get("total_tokens")),
            "cost_usd": add(run.cost_usd, cost)}


def rollups(run: Run) -> Fields:
    """The model-call rollups of an in-memory ``run``, as a write stores them."""
    return {name: getattr(run, name) for name in ROLLUPS}


def pause(*, now: datetime, last_seq: int | None = None, current_node: str = "",
          calls: Fields | None = None) -> Fields:
    """The graph waits for an operator's answer: nobody holds the run meanwhile."""
    return {**progress(now=now, last_seq=last_seq, current_node=current_node, calls=calls),
            "status": Status.INTERRUPTED, "owner": ""}


def finish(*, status: str, now: datetime, last_seq: int | None = None, current_node: str = "",
           output: Any = None, error: tuple[str, str] | None = None,
           calls: Fields | None = None) -> Fields:
    """The run ends (succeeded, failed or cancelled), with its output or its error."""
    if status not in Run.FINISHED:
        raise ValueError(f"{status!r} is not a final status; use one of {Run.FINISHED}")
    fields = {**progress(now=now, last_seq=last_seq, current_node=current_node, calls=calls),
              "status": status, "finished_at": now, "owner": "", "cancel_requested": False}
    if output is not None:
        fields["output"] = output
    if error is not None:
        fields["error_message"], fields["error_traceback"] = error
    return fields


def halt(*, now: datetime, last_seq: int | None = None, current_node: str = "",
         calls: Fields | None = None) -> Fields:
    """The graph stopped at a breakpoint (or after a step): nobody holds the run meanwhile."""
    return {**progress(now=now, last_seq=last_seq, current_node=current_node, calls=calls),
            "status": Status.PAUSED, "owner": "", "step_once": False,
            "breakpoints_changed": False}


def stop(*, status: str, now: datetime, last_seq: int | None = None, current_node: str = "",
         output: Any = None, error: tuple[str, str] | None = None,
         calls: Fields | None = None) -> Fields:
    """Where an execution leaves the run: paused (interrupted) or finished."""
    if status == Status.INTERRUPTED:
        return pause(now=now, last_seq=last_seq, current_node=current_node, calls=calls)
    if status == Status.PAUSED:
        return halt(now=now, last_seq=last_seq, current_node=current_node, calls=calls)
    return finish(status=status, now=now, last_seq=last_seq, current_node=current_node,
                  output=output, error=error, calls=calls)


def set_breakpoints(*, before: list[str], after: list[str], held: bool) -> Fields:
    """New breakpoints; an executor that holds the run applies them at its next boundary."""
    return {"interrupt_before": before, "interrupt_after": after, "breakpoints_changed": held}


def request_step() -> Fields:
    """The next execution runs one super-step, then pauses again."""
    return {"step_once": True}


def request_cancel(*, by: str = "") -> Fields:
    """An operator asks the executor that holds the run to stop at the next node boundary."""
    return {"cancel_requested": True, "cancel_requested_by": by}


# -- the thread's status ----------------------------------------------------------------

THREAD_STATUS = {
    Status.QUEUED: Thread.Status.BUSY,
    Status.RUNNING: Thread.Status.BUSY,
    Status.INTERRUPTED: Thread.Status.INTERRUPTED,
    Status.PAUSED: Thread.Status.INTERRUPTED,
    Status.FAILED: Thread.Status.ERROR,
    Status.SUCCEEDED: Thread.Status.IDLE,
    Status.CANCELLED: Thread.Status.IDLE,
}
"""The status a LangGraph thread takes when its latest run takes a status (an answer or a
continue recorded and not yet taken up makes it busy: :data:`UNSETTLED`)."""

QUEUED_THREAD = THREAD_STATUS[Status.QUEUED]
"""A thread with a new run (started, forked or enqueued on it)."""

UNSETTLED = Thread.Status.BUSY
"""A thread whose run has an answer or a continue recorded that no executor took up yet."""


def thread_status(fields: Fields) -> str | None:
    """The thread status a transition's ``fields`` give its run's thread (None: unchanged)."""
    status = fields.get("status")
    return None if status is None else THREAD_STATUS[Status(status)]


_RUN, _THREAD = Run._meta.db_table, Thread._meta.db_table
THREAD_SQL = (
    f"UPDATE {_THREAD} SET status = CASE WHEN EXISTS (SELECT 1 FROM {_RUN} AS queued "
    f"WHERE queued.conversation_id = {_THREAD}.id AND queued.status = 'queued' "
    f"AND queued.waits_for_id IS NOT NULL AND queued.id <> {{mark}}) THEN 'busy' "
    f"ELSE {{mark}} END "
    f"WHERE id = (SELECT conversation_id FROM {_RUN} WHERE id = {{mark}}) "
    f"AND NOT EXISTS (SELECT 1 FROM {_RUN} AS this, {_RUN} AS newer "
    f"WHERE this.id = {{mark}} AND newer.conversation_id = this.conversation_id "
    f"AND newer.created_at > this.created_at "
    f"AND NOT (newer.status = 'queued' AND newer.waits_for_id IS NOT NULL))"
)
"""How a run's new status reaches its thread, on both paths (parameters: run id, thread
status, run id, run id): the thread takes it only from its latest run (runs enqueued
behind it aside), and stays busy while runs are enqueued on it."""


def thread_params(run_id: Any, status: str) -> list[Any]:
    """The parameters of :data:`THREAD_SQL` (``run_id`` as the driver takes it)."""
    return [run_id, str(status), run_id, run_id]


# -- the ORM path ----------------------------------------------------------------------


def orm_update(fields: Fields) -> dict[str, Any]:
    """``fields`` as keyword arguments of ``QuerySet.update`` (``FirstSet`` → ``Coalesce``)."""
    return {name: Coalesce(F(name), value.value) if isinstance(value, FirstSet) else value
            for name, value in fields.items()}


def orm_apply(run_id: Any, fields: Fields) -> int:
    """Write a transition's ``fields`` to one run, and its new status to its thread."""
    updated = Run.objects.filter(id=run_id).update(**orm_update(fields))
    if (status := thread_status(fields)) is not None:
        orm_thread_status(run_id, status)
    return updated


def orm_append(locked: Run, kind: str, *, then: Callable[[int], Fields] | None = None,
               **event: Any) -> int:
    """Append one event to the log of a run whose row this transaction holds, with the
    transition that goes with it: ``then(seq)`` (by default :func:`progress` to that seq).
    The ORM path's one place where a seq is assigned (the executor's is its writer's)."""
    seq = next_seq(locked)
    RunEvent.objects.create(run=locked, seq=seq, kind=kind, **event)
    fields = then(seq) if then is not None else progress(now=timezone.now(), last_seq=seq)
    orm_apply(locked.id, fields)
    apply_to(locked, fields)
    return seq


def orm_thread_status(run_id: Any, status: str) -> None:
    """Give the run's thread ``status`` (a :data:`THREAD_STATUS` value) by :data:`THREAD_SQL`."""
    uid = run_id if isinstance(run_id, UUID) else UUID(str(run_id))
    stored = uid if connection.vendor == "postgresql" else uid.hex  # Django's UUID columns
    with connection.cursor() as cursor:
        cursor.execute(THREAD_SQL.format(mark="%s"), thread_params(stored, status))


def apply_to(run: Run, fields: Fields) -> None:
    """Mirror ``fields`` on an in-memory ``run`` (after they were written)."""
    for name, value in fields.items():
        if isinstance(value, FirstSet):
            if getattr(run, name) is None:
                setattr(run, name, value.value)
        else:
            setattr(run, name, value)
