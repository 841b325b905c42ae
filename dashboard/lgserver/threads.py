"""What a LangGraph run request does to a thread, through the run service.

A thread's next run is decided here, and only here:

- no run yet: a new run with the input (``services.run_create``);
- ``command={"resume": …}``: the thread's interrupted run is answered (one answer, or a
  map by interrupt id) and goes on; the LangGraph run is that same run;
- ``input=None`` on a run paused at a breakpoint: it continues (``services.run_continue``);
- otherwise (new input on an ended run, or ``checkpoint_id``): a fork of the run holding
  the checkpoint, from there, with the input (``services.run_fork``);
- the thread is busy: ``multitask_strategy`` decides — ``reject`` (409), ``interrupt``
  (the busy run is cancelled, the new one starts from its last checkpoint), ``rollback``
  (cancelled, and the new one starts from where the busy run started) or ``enqueue`` (the
  new run waits, queued, until the busy one stops, then goes on from its last checkpoint).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from dashboard import services
from dashboard.lgserver.shapes import busy, has_queue
from dashboard.models import Interrupt, Run, RunEvent, Thread
from dashboard.services import RunInputError, RunStateError, ServiceError, User

STRATEGIES = ("reject", "interrupt", "rollback", "enqueue")


class ThreadBusy(RunStateError):
    """The thread's run executes and the request's strategy is ``reject``."""

    code = "thread_busy"


class Unsupported(ServiceError):
    """A part of LangGraph's API Planwatch does not serve (the message says what to use)."""

    code = "unsupported"


@dataclass
class RunRequest:
    """The parts of a LangGraph run request that decide what happens."""

    assistant_id: str
    input: Any = None
    command: dict[str, Any] | None = None
    checkpoint_id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    interrupt_before: list[str] = field(default_factory=list)
    interrupt_after: list[str] = field(default_factory=list)
    multitask_strategy: str = "reject"
    configurable: dict[str, Any] = field(default_factory=dict)
    context: Any = None

    def run_options(self) -> dict[str, Any]:
        """What every new run of the request is created with."""
        return {"interrupt_before": self.interrupt_before,
                "interrupt_after": self.interrupt_after, "metadata": self.metadata,
                "multitask_strategy": self.multitask_strategy,
                "configurable": self.configurable, "context": self.context}


@contextmanager
def locked(thread: Thread) -> Iterator[None]:
    """Hold the thread's row for the decision about its next run, until it is committed.

    A conditional UPDATE takes the row's lock on PostgreSQL (SQLite's IMMEDIATE
    transaction takes the database's), so concurrent run requests on one thread decide
    one after another, each seeing what the one before it did. What may execute is the
    constraint ``run_one_running_per_thread``'s to guarantee; this keeps the requests'
    answers and queues consistent.
    """
    with transaction.atomic():
        Thread.objects.filter(pk=thread.pk).update(updated_at=timezone.now())
        yield


def holder_of(thread: Thread, checkpoint_id: str) -> Run:
    """The run of ``thread`` that wrote ``checkpoint_id``; ``RunInputError`` names the way out."""
    run = (Run.objects.filter(conversation=thread, events__kind=RunEvent.Kind.CHECKPOINT,
                              events__namespace="", events__checkpoint_id=checkpoint_id)
           .order_by("-created_at").first())
    if run is None:
        raise RunInputError(
            f"thread {thread.id} has no checkpoint {checkpoint_id!r}; list them with "
            f"POST /threads/{thread.id}/history", errors={"checkpoint_id": "unknown checkpoint"})
    return run


def start(thread: Thread, req: RunRequest, user: User, current: Run | None) -> Run:
    """Start (or resume, or continue) the thread's next run after ``current`` (its
    :func:`~dashboard.lgserver.shapes.latest_run`); returns the run that goes on."""
    if req.multitask_strategy not in STRATEGIES:
        raise RunInputError(f"multitask_strategy {req.multitask_strategy!r} is not one of "
                            f"{', '.join(STRATEGIES)}",
                            errors={"multitask_strategy": "unknown strategy"})
    if current is not None and current.graph != req.assistant_id:
        raise RunInputError(
            f"thread {thread.id} runs graph {current.graph!r}, not {req.assistant_id!r}; "
            "use a new thread for another graph", errors={"assistant_id": "another graph"})
    command = req.command or {}
    if set(command) - {"resume"}:
        raise Unsupported(f"command {sorted(set(command) - {'resume'})} is not served; "
                          "Planwatch takes Command(resume=…) only (edit state with "
                          "POST /threads/<id>/state)", errors={"command": "only resume"})
    if "resume" in command:
        return _resume(thread, current, command["resume"], user)
    if current is None:
        if req.checkpoint_id:
            raise RunInputError(f"thread {thread.id} has no runs, so no checkpoint "
                                f"{req.checkpoint_id!r}", errors={"checkpoint_id": "no runs"})
        return services.run_create(graph=req.assistant_id, input=req.input or {}, user=user,
                                   thread=thread, **req.run_options())
    base: Run | None = current
    checkpoint = ""
    if req.checkpoint_id:
        base, checkpoint = holder_of(thread, req.checkpoint_id), req.checkpoint_id
    thread_busy = busy(current) or has_queue(thread)
    if thread_busy and req.multitask_strategy == "enqueue" and not req.checkpoint_id:
        return services.run_enqueue(after=_last_queued(current), input=req.input, user=user,
                                    thread=thread, **req.run_options())
    if thread_busy:
        base, checkpoint = _make_room(thread, current, req, user, base, checkpoint)
    elif current.status == Run.Status.PAUSED and req.input is None and not checkpoint:
        return services.run_continue(run=current, user=user)
    elif current.status in (Run.Status.INTERRUPTED, Run.Status.PAUSED):
        services.run_cancel(run=current, user=user)  # the thread moves on without answering
    if base is not None and not checkpoint:
        checkpoint = base.last_root_checkpoint()
    if base is None or not checkpoint:  # nothing to go on from: a fresh run
        return services.run_create(graph=req.assistant_id, input=req.input or {}, user=user,
                                   thread=thread, **req.run_options())
    return services.run_fork(
        run=base, checkpoint_id=checkpoint, user=user, thread=thread,
        input=req.input if req.input is not None else services.NO_INPUT, **req.run_options())


def _last_queued(current: Run) -> Run:
    """The run a new enqueued run waits for: the last one already queued behind
    ``current``, or ``current`` itself (so several enqueued runs go one after another)."""
    run = current
    while (nxt := Run.objects.waiting_turn().filter(waits_for=run)
           .order_by("-created_at").first()) is not None:
        run = nxt
    return run


def _make_room(thread: Thread, current: Run, req: RunRequest, user: User,
               base: Run | None, checkpoint: str) -> tuple[Run | None, str]:
    """Apply the strategy to a busy thread; the run and checkpoint the new run starts from
    (no run: start afresh)."""
    if req.multitask_strategy == "reject":
        raise ThreadBusy(
            f"thread {thread.id} is busy with run {current.id} ({current.status}); wait for "
            "it (runs.join), cancel it, or send multitask_strategy 'interrupt' or 'rollback'")
    services.run_cancel(run=current, user=user)
    if checkpoint:
        return base, checkpoint
    if req.multitask_strategy == "rollback":  # from where the busy run started
        return current.parent, current.forked_from_checkpoint
    return current, ""  # interrupt: from the busy run's last checkpoint


def _resume(thread: Thread, current: Run | None, value: Any, user: User) -> Run:
    """Answer the thread's interrupted run with ``value`` (or a map by interrupt id)."""
    if current is None or current.status != Run.Status.INTERRUPTED:
        state = current.status if current else "empty"
        raise RunStateError(f"thread {thread.id} is {state}, not waiting for an answer; "
                            "resume only an interrupted thread")
    pending = list(current.interrupts.filter(status=Interrupt.Status.PENDING))
    ids = {i.interrupt_id for i in pending}
    if isinstance(value, dict) and value and set(value) <= ids:
        services.run_resume(run=current, answers=value, user=user)
    elif len(pending) == 1:
        services.interrupt_answer(interrupt=pending[0], answer=value, user=user)
    else:
        raise RunInputError(
            f"run {current.id} waits on {len(pending)} questions ({', '.join(sorted(ids))}); "
            "resume with a map {interrupt_id: answer}", errors={"command": "ambiguous resume"})
    current.refresh_from_db()
    return current
