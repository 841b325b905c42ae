"""Deadlines that end safely, and the loop that tells people of questions.

A question's deadline (``GraphSpec.question_deadlines`` or its value's ``"deadline"``,
resolved when it is asked: ``dashboard.runs.store``) brings three moments, each acted on
once whatever the number of processes sweeping, by a conditional ``UPDATE`` on its own
column: a reminder before it (``reminded_at``: its people are reminded), an escalation at
it (``escalated_at``: the escalation groups may answer it too, and are told), and when it
passes unanswered (``expires_at``) the graph's declared outcome, through
:func:`dashboard.services.interrupt_expire` (the same claim as every answer). Reminders
and escalations are recorded in the run's log, so the trace shows them.

Every web process runs :func:`apoll_forever` on its executor's loop, beside the cron poll.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DatabaseError, close_old_connections, connection, transaction
from django.utils import timezone

from dashboard import notices, services
from dashboard.duty_beats import duty_beat
from dashboard.models import Interrupt, InterruptGroup, Notice, Run, RunEvent
from dashboard.runs import store
from dashboard.runs.conf import planwatch_setting
from dashboard.runs.dispatch import get_executor

logger = logging.getLogger("planwatch.deadlines")


def _pending(**filters: Any) -> Any:
    return (Interrupt.objects.filter(status=Interrupt.Status.PENDING, **filters)
            .select_related("run").order_by("created_at")[:100])


def _record(interrupt: Interrupt, kind: str, payload: dict[str, Any]) -> None:
    """Write the moment into the run's log, if nobody executes the run now (an executor
    numbers a held run's events itself; the claim stands either way)."""
    locked = store.lock_run(interrupt.run_id)
    if locked is not None and not locked.owner and locked.status == Run.Status.INTERRUPTED:
        store.append_event(locked, kind, node=interrupt.node, namespace=interrupt.namespace,
                           payload={"interrupt_id": interrupt.interrupt_id, **payload})


def deadlines_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Remind, escalate and expire the questions whose moments came; how many of each
    this call acted on (another process's share is not counted)."""
    now = now or timezone.now()
    done = {"reminded": 0, "escalated": 0, "expired": 0}
    for asked in _pending(remind_at__lte=now, reminded_at__isnull=True):
        with transaction.atomic():
            if Interrupt.objects.filter(pk=asked.pk, status=Interrupt.Status.PENDING,
                                        reminded_at__isnull=True).update(reminded_at=now):
                notices.notices_queue(interrupt=asked, kind=Notice.Kind.REMINDER, now=now)
                _record(asked, RunEvent.Kind.QUESTION_REMINDED,
                        {"deadline_at": asked.deadline_at.isoformat()
                         if asked.deadline_at else None})
                done["reminded"] += 1
    for asked in _pending(deadline_at__lte=now, escalated_at__isnull=True):
        groups = list((asked.deadline or {}).get("escalate_to") or [])
        with transaction.atomic():
            won = Interrupt.objects.filter(pk=asked.pk, status=Interrupt.Status.PENDING,
                                           escalated_at__isnull=True).update(escalated_at=now)
            if won and groups:
                _escalate(asked, groups, now)
                done["escalated"] += 1
    for asked in _pending(expires_at__lte=now):
        try:
            services.interrupt_expire(interrupt=asked)
        except services.ServiceError as exc:  # answered, withdrawn or expired meanwhile
            logger.debug("question %s not expired: %s", asked.pk, exc)
            continue
        done["expired"] += 1
    return done


def _escalate(asked: Interrupt, groups: list[str], now: datetime) -> None:
    """Give a question whose deadline came to more groups (who may then answer it), tell
    them, and record it."""
    had = set(asked.group_names)
    if had:  # with no group anyone may answer it already: the escalation only tells
        InterruptGroup.objects.bulk_create(
            [InterruptGroup(interrupt=asked, name=name) for name in groups if name not in had],
            ignore_conflicts=True)
    notices.notices_queue(interrupt=asked, kind=Notice.Kind.ESCALATION, groups=groups, now=now)
    _record(asked, RunEvent.Kind.QUESTION_ESCALATED, {"groups": groups})


DUE = f"""
    SELECT EXISTS (SELECT 1 FROM {Interrupt._meta.db_table}
                   WHERE status = %s AND (notified_at IS NULL
                         OR (remind_at <= %s AND reminded_at IS NULL)
                         OR (deadline_at <= %s AND escalated_at IS NULL) OR expires_at <= %s))
        OR EXISTS (SELECT 1 FROM {Notice._meta.db_table}
                   WHERE (status = %s AND next_attempt_at <= %s)
                      OR (status = %s AND claimed_until < %s))
"""
"""Whether a look has anything to do (parameters: pending, now three times, pending, now,
sending, now): a question not told yet, or whose reminder, escalation or expiry came (the
conditions of :func:`notices.notices_queue_asked` and :func:`deadlines_sweep`), or a notice
due (:func:`notices.notices_send_due`). Most looks find nothing: one statement then."""


def anything_due(now: datetime) -> bool:
    """Whether a look at ``now`` has anything to do (:data:`DUE`)."""
    at = connection.ops.adapt_datetimefield_value(now)
    pending = Interrupt.Status.PENDING.value
    with connection.cursor() as cursor:
        cursor.execute(DUE, [pending, at, at, at, Notice.Status.PENDING.value, at,
                             Notice.Status.SENDING.value, at])
        row = cursor.fetchone()
    return bool(row and row[0])


def poll_once() -> dict[str, int]:
    """One look: queue the notices of new questions, act on the deadlines that came,
    send the notices that are due (nothing more when :func:`anything_due` says none
    is). A database error drops this thread's connection (the next look draws a fresh
    one); a fault of one part leaves the others to run."""
    close_old_connections()
    done: dict[str, int] = {}
    try:
        try:
            if not anything_due(timezone.now()):
                return done
        except DatabaseError:
            logger.warning("looking for due questions and notices failed; trying again "
                           "next look", exc_info=True)
            return done
        for name, step in (("notified", notices.notices_queue_asked),
                           ("budgets", notices.notices_queue_budgets),
                           ("deadlines", deadlines_sweep),
                           ("sent", lambda: len(notices.notices_send_due()))):
            try:
                result = step()
            except DatabaseError:
                logger.warning("%s failed; trying again next look", name, exc_info=True)
                connection.close()
                continue
            except Exception:
                logger.warning("%s failed", name, exc_info=True)
                continue
            if isinstance(result, dict):
                done.update(result)
            else:
                done[name] = int(result)
    finally:
        # Back to the pool between looks: the look runs on whichever thread of the loop's
        # executor is free, and a connection left open on each would hold the pool's share
        # of every one of them (PostgreSQL's pool ran dry under the fault tests).
        connection.close()
    return done


async def apoll_forever() -> None:
    """Look every ``NOTICE_POLL_SECONDS`` (on the executor's loop; the work in a thread)."""
    while True:
        duty_beat("deadlines")
        await sync_to_async(poll_once, thread_sensitive=False)()
        await asyncio.sleep(planwatch_setting("NOTICE_POLL_SECONDS"))


def start_poller() -> None:
    """Tell of questions and keep their deadlines in this process, beside its executor."""
    get_executor().spawn(apoll_forever())
