"""Claiming a run: one executor takes it, and learns what to feed the graph.

A run is taken with a conditional UPDATE (no other live executor may hold it), so one run
is never executed by two processes at once. A fresh run is claimed on the event sink's
connection in one statement (the common case); a resume or a recovery goes through the
ORM, which also hands over the answers the graph resumes with. Which runs are free and
which fields a claim sets are :mod:`dashboard.runs.transitions`' to say.
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from dashboard.models import Interrupt, Run, RunEvent
from dashboard.runs import transitions
from dashboard.runs.orm import database_sync_to_async, relax_commit
from dashboard.runs.sink import EventSink

Kind = RunEvent.Kind


@dataclass(frozen=True)
class Answer:
    """An operator's answer, taken from the database to resume the graph with."""

    interrupt_id: str
    answer: Any
    answered_by: str
    node: str
    namespace: str

    def event(self) -> dict[str, Any]:
        """The ``interrupt_answered`` event that records it in the run's log."""
        return {
            "kind": Kind.INTERRUPT_ANSWERED, "node": self.node, "namespace": self.namespace,
            "payload": {"interrupt_id": self.interrupt_id, "answer": self.answer,
                        "answered_by": self.answered_by},
        }


@dataclass
class Claim:
    """A run this executor now holds: how it starts, its next seq, what it already saw."""

    run: Run
    kind: str
    """``run_started``, ``run_resumed`` or ``run_recovered``: the event the claim writes."""
    next_seq: int
    checkpoint_ids: list[str]
    answers: list[Answer]


async def aclaim(run_id: uuid.UUID, *, owner: str, mode: str, sink: EventSink) -> Claim | None:
    """Take the run for ``owner``, or return None if it is not ``owner``'s to run now."""
    if mode == "start":  # the common case: one UPDATE on the sink's connection
        now = timezone.now()
        try:
            run = await sink.aclaim_queued(run_id, owner=owner, now=now,
                                           stale=transitions.stale_before(now))
        except DRIVER_INTEGRITY_ERRORS:  # another run of its thread was claimed meanwhile
            return None
        if run is not None:
            return Claim(run, Kind.RUN_STARTED, transitions.next_seq(run), [], [])
    try:
        return await _aclaim_orm(run_id, owner, mode)
    except IntegrityError:  # another run of its thread was claimed meanwhile: it waits
        return None


def _driver_integrity_errors() -> tuple[type[Exception], ...]:
    """The drivers' own integrity errors (the sink's connections are not Django's)."""
    errors: list[type[Exception]] = [sqlite3.IntegrityError]
    with contextlib.suppress(ImportError):
        import psycopg

        errors.append(psycopg.IntegrityError)
    return tuple(errors)


DRIVER_INTEGRITY_ERRORS = _driver_integrity_errors()


def sibling_running(run: Run) -> bool:
    """Whether another run of the run's thread executes (the run then waits its turn)."""
    return run.conversation_id is not None and Run.objects.running().filter(
        conversation_id=run.conversation_id).exclude(id=run.id).exists()


@database_sync_to_async
def _aclaim_orm(run_id: uuid.UUID, owner: str, mode: str) -> Claim | None:
    """Take any claimable run (start, resume, recover) through the ORM, or return None."""
    now = timezone.now()
    free = transitions.free_q(owner=owner, stale=transitions.stale_before(now))
    with transaction.atomic():
        relax_commit()  # a lost claim leaves the run queued: recovery dispatches it again
        runs = Run.objects.select_for_update().filter(id=run_id)
        run = runs.filter(free).first()
        if run is None:
            return None
        answers: list[Answer] = []
        if run.status != Run.Status.RUNNING and sibling_running(run):
            return None  # dispatched again when that run stops
        if run.status == Run.Status.QUEUED and mode == "start":
            if run.waits_for_id is not None and not _take_turn(run):
                return None  # enqueued behind a run of its thread that has not stopped
            kind = Kind.RUN_FORKED if run.parent_id else Kind.RUN_STARTED
        elif run.status == Run.Status.PAUSED and mode == "continue":
            kind = Kind.RUN_RESUMED
        elif run.status == Run.Status.RUNNING and run.owner != owner:
            kind = Kind.RUN_RECOVERED  # its executor died (stale heartbeat)
        elif run.status == Run.Status.INTERRUPTED:
            answers = _take_answers(run)
            if not answers:
                return None  # nothing to resume with yet
            kind = Kind.RUN_RESUMED
        else:
            return None
        fields = transitions.claim(owner=owner, now=now)
        transitions.orm_apply(run.id, fields)
        transitions.apply_to(run, fields)
        if kind in (Kind.RUN_STARTED, Kind.RUN_FORKED):  # a fresh run: no checkpoints yet
            return Claim(run, kind, transitions.next_seq(run), [], answers)
        checkpoints = list(
            run.events.filter(kind=Kind.CHECKPOINT).values_list("checkpoint_id", flat=True)
        )
    return Claim(run, kind, transitions.next_seq(run), checkpoints, answers)


def _take_turn(run: Run) -> bool:
    """Whether an enqueued run may start: the run it waits for has stopped (ended, or
    waits for an answer or at a breakpoint, with nothing about to resume it). It then
    goes on from that run's last checkpoint, as read now."""
    ahead = run.waits_for
    if ahead is not None:
        if Run.objects.busy().filter(id=ahead.id).exists():
            return False
        last = ahead.last_root_checkpoint()
        if last and not run.forked_from_checkpoint:
            run.forked_from_checkpoint = last
            Run.objects.filter(id=run.id).update(forked_from_checkpoint=last)
    if run.parent_id and not run.forked_from_checkpoint:  # it never wrote one: start afresh
        run.parent_id = None
        Run.objects.filter(id=run.id).update(parent=None)
    return True


def _take_answers(run: Run) -> list[Answer]:
    """Answered interrupts not yet fed to the graph; mark them consumed."""
    rows = list(Interrupt.objects.unconsumed().filter(run=run).select_related("answered_by"))
    Interrupt.objects.filter(pk__in=[r.pk for r in rows]).take_up(run.last_root_checkpoint())
    return [
        Answer(r.interrupt_id, r.answer, r.answerer_name, r.node, r.namespace)
        for r in rows
    ]


@database_sync_to_async
def aheartbeat(run_ids: list[uuid.UUID], owner: str
               ) -> tuple[set[uuid.UUID], set[uuid.UUID]]:
    """Prove ``owner`` is alive for its runs; return those an operator asked to cancel,
    and those whose breakpoints an operator changed."""
    fields = transitions.heartbeat(now=timezone.now())
    Run.objects.filter(id__in=run_ids, owner=owner).update(**transitions.orm_update(fields))
    flagged = Run.objects.filter(id__in=run_ids, owner=owner).filter(
        Q(cancel_requested=True) | Q(breakpoints_changed=True))
    cancel: set[uuid.UUID] = set()
    rebreak: set[uuid.UUID] = set()
    for run_id, cancelled, changed in flagged.values_list(
            "id", "cancel_requested", "breakpoints_changed"):
        if cancelled:
            cancel.add(run_id)
        if changed:
            rebreak.add(run_id)
    return cancel, rebreak
