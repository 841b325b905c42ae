"""Run transitions: every change of a run's status, owner, seq and final fields is decided here.

A transition is a function that returns the *fields* a run takes (a plain dict of column
values); nothing here writes. The run store (:mod:`dashboard.runs.store`) applies them, on
the ORM or on the executor's SQL fast path, and adds no field of its own; the contract
test runs every transition through both paths on both databases and compares the rows.

The event log and ``Run.last_seq`` are always written in one statement or transaction, so
the next seq of a run is ``last_seq + 1`` (:func:`next_seq`), read nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q

from dashboard.models import Run, Thread
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
    """ORM form of "nobody else holds the run": no owner, ``owner`` itself, or a dead one
    (the fast path's claim, ``dashboard.runs.store.CLAIM``, says the same in SQL)."""
    return Q(owner="") | Q(owner=owner) | Q(heartbeat_at__lt=stale)




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


def apply_to(run: Run, fields: Fields) -> None:
    """Mirror ``fields`` on an in-memory ``run`` (after they were written)."""
    for name, value in fields.items():
        if isinstance(value, FirstSet):
            if getattr(run, name) is None:
                setattr(run, name, value.value)
        else:
            setattr(run, name, value)
