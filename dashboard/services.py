"""Writes: start, resume, answer and cancel runs. Every entry point goes through here."""

from __future__ import annotations

import json
import logging
from typing import Any
from uuid import UUID, uuid4

from asgiref.sync import async_to_sync
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.utils import timezone

from dashboard.models import Interrupt, Run, RunEvent
from dashboard.runs import dispatch, doorbells, transitions
from planner.registry import InputError, get_graph

logger = logging.getLogger("planwatch.services")

User = AbstractBaseUser | AnonymousUser

MAX_ANSWER_BYTES = 64 * 1024


class ServiceError(Exception):
    """A request the service refuses; ``code`` is stable, the message says what to do."""

    code = "invalid"

    def __init__(self, message: str, *, errors: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors or {}


class RunInputError(ServiceError):
    """The start input does not fit the graph's input form."""

    code = "invalid_input"


class RunStateError(ServiceError):
    """The run is not in a state that allows the request (finished, not interrupted …)."""

    code = "run_state"


class InterruptClosed(ServiceError):
    """The interrupt was answered already or its run moved on or was cancelled."""

    code = "interrupt_closed"

    def __init__(self, message: str, *, interrupt: Interrupt) -> None:
        super().__init__(message)
        self.interrupt = interrupt


def run_create(*, graph: str, input: dict[str, Any], user: User | None) -> Run:
    """Validate ``input`` with the graph's registry entry, store a queued run, start it."""
    try:
        spec = get_graph(graph)
    except KeyError as exc:
        raise RunInputError(str(exc.args[0]), errors={"graph": str(exc.args[0])}) from None
    try:
        initial = spec.make_input(input)
    except InputError as exc:
        raise RunInputError(f"invalid input for {graph!r}: {exc}", errors=exc.errors) from None
    run_uuid = uuid4()
    with transaction.atomic():
        run = Run.objects.create(
            id=run_uuid, graph=spec.name, graph_version=spec.version,
            thread_id=spec.thread_id(str(run_uuid)), input=initial,
            created_by=user if user is not None and user.is_authenticated else None,
        )
        transaction.on_commit(lambda: _after_change(run.id, "start"))
    return run


def interrupt_answer(*, interrupt: Interrupt, answer: Any, user: User) -> Interrupt:
    """Record one answer exactly once; the database decides who was first.

    Raises ``InterruptClosed`` (saying who answered what, and when) if it was answered
    already, or if its run was cancelled or has moved on.
    """
    _check_answer_size(answer)
    now = timezone.now()
    with transaction.atomic():
        # Lock the run (run_cancel locks it too), then one UPDATE with no join: on
        # PostgreSQL a joined UPDATE becomes ``id IN (subquery)``, which is not re-checked
        # after waiting for a concurrent answer's row lock, so both answers would win.
        waiting = Run.objects.select_for_update().filter(
            id=interrupt.run_id, status__in=[Run.Status.INTERRUPTED, Run.Status.RUNNING],
        ).exists()
        won = waiting and Interrupt.objects.filter(
            pk=interrupt.pk, status=Interrupt.Status.PENDING,
        ).update(status=Interrupt.Status.ANSWERED, answer=answer, answered_by=user,
                 answered_at=now)
        interrupt.refresh_from_db()
        if not won:
            raise InterruptClosed(_closed_message(interrupt), interrupt=interrupt)
        run_id = interrupt.run_id
        transaction.on_commit(lambda: _after_change(run_id, "resume"))
    return interrupt


def run_resume(*, run: Run, answers: dict[str, Any], user: User) -> list[Interrupt]:
    """Answer several of a run's pending interrupts (by LangGraph interrupt id) at once."""
    if not answers:
        raise ServiceError("no answers given; pass {interrupt_id: answer, …}")
    pending = {i.interrupt_id: i for i in run.interrupts.filter(interrupt_id__in=answers)}
    unknown = sorted(set(answers) - set(pending))
    if unknown:
        raise ServiceError(
            f"run {run.id} has no interrupt {', '.join(map(repr, unknown))}; "
            f"its interrupts: {', '.join(run.interrupts.values_list('interrupt_id', flat=True))}",
            errors={"answers": "unknown interrupt id"},
        )
    with transaction.atomic():
        return [
            interrupt_answer(interrupt=pending[iid], answer=value, user=user)
            for iid, value in answers.items()
        ]


def run_cancel(*, run: Run, user: User) -> Run:
    """Cancel a run: at once if nobody executes it, else at its next node boundary."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(id=run.id)
        if locked.is_finished:
            raise RunStateError(
                f"run {run.id} already {locked.status}; only queued, running or interrupted "
                "runs can be cancelled"
            )
        if locked.owner:  # an executor holds it: ask it to stop
            Run.objects.filter(id=run.id).update(
                **transitions.orm_update(transitions.request_cancel()))
            transaction.on_commit(lambda: dispatch.request_cancel(run.id))
        else:
            seq = transitions.next_seq(locked)
            who = user.get_username() if user.is_authenticated else ""
            RunEvent.objects.create(run=locked, seq=seq, kind=RunEvent.Kind.RUN_CANCELLED,
                                    payload={"by": who})
            fields = transitions.finish(status=Run.Status.CANCELLED, now=timezone.now(),
                                        last_seq=seq)
            Run.objects.filter(id=run.id).update(**transitions.orm_update(fields))
            locked.interrupts.filter(status=Interrupt.Status.PENDING).update(
                status=Interrupt.Status.CANCELLED
            )
            transaction.on_commit(lambda: _announce(run.id))
    run.refresh_from_db()
    return run


def run_recover_stale(*, include_queued: bool = False) -> list[UUID]:
    """Hand every run whose executor stopped heart-beating to an executor again."""
    return dispatch.recover_stale(include_queued=include_queued)


def _check_answer_size(answer: Any) -> None:
    size = len(json.dumps(answer, default=str))
    if size > MAX_ANSWER_BYTES:
        raise ServiceError(
            f"answer is {size:,} bytes; the limit is {MAX_ANSWER_BYTES:,}. Shorten it.",
            errors={"answer": f"too long ({size:,} bytes, limit {MAX_ANSWER_BYTES:,})"},
        )


def _closed_message(interrupt: Interrupt) -> str:
    if interrupt.status == Interrupt.Status.ANSWERED:
        who = interrupt.answered_by.get_username() if interrupt.answered_by else "someone"
        when = interrupt.answered_at.strftime("%Y-%m-%d %H:%M:%S UTC") if interrupt.answered_at \
            else "earlier"
        return f"already answered by {who} at {when} with {interrupt.answer!r}; nothing changed"
    if interrupt.status == Interrupt.Status.CANCELLED:
        return "this question was withdrawn (its run was cancelled or moved on); nothing changed"
    return (f"run is {interrupt.run.status}, not waiting for an answer; nothing changed")


def _after_change(run_id: UUID, mode: str) -> None:
    dispatch.dispatch(run_id, mode)
    _announce(run_id)


def _announce(run_id: UUID) -> None:
    summary = doorbells.run_summary(
        Run.objects.values(*doorbells.SUMMARY_FIELDS).get(id=run_id)
    )
    try:
        async_to_sync(doorbells.abroadcast_run)(summary)
        async_to_sync(doorbells.abroadcast_inbox)()
    except RuntimeError:  # called from inside an event loop thread
        logger.debug("announce skipped for %s (inside an event loop)", run_id)
