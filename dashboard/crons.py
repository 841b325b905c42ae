"""Crons: run requests kept with a schedule, and the scheduler that starts them.

Every web process polls (``PLANWATCH["CRON_POLL_SECONDS"]``) for enabled crons whose
``next_run_date`` has come; each due cron is claimed with one conditional ``UPDATE`` (its
next date moves on only if nobody moved it first), so with several processes a due time
starts one run. The run starts through the same path as a LangGraph run request
(:func:`dashboard.thread_runs.start`): on the cron's thread, or on a new thread of
its own; with the cron's assistant's config and context merged in. Schedules are cron
expressions in UTC (``croniter``; a sixth field counts seconds, a seventh the year).

A schedule is checked by computing its next time (``"0 0 30 2 *"`` is a valid expression
with none). A cron whose next time cannot be computed when it is due (a year-bound schedule
past its last time) is marked broken and skipped: one bad cron never stops the others. A
poll that meets a database error drops the process's connection, so the next poll draws a
fresh one (a PostgreSQL restart or ``pg_terminate_backend`` stops no scheduler).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from croniter import CroniterError, croniter
from django.contrib.auth.models import AnonymousUser
from django.db import DatabaseError, close_old_connections, connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from dashboard import policy, retention, services
from dashboard.assistants import assistant_resolve, run_assistant_fields
from dashboard.duty_beats import duty_beat
from dashboard.models import Cron, Run, Thread
from dashboard.runs.conf import planwatch_setting
from dashboard.services import LimitReached, RunInputError, ServiceError, User
from dashboard.thread_runs import RunRequest, reserved_config, start

logger = logging.getLogger("planwatch.crons")

REQUEST_FIELDS = ("input", "config", "context", "metadata", "interrupt_before",
                  "interrupt_after", "multitask_strategy")
"""The parts of a run request a cron keeps and starts each run with."""


class ScheduleEnded(ValueError):
    """A schedule with no time after the one asked about (``"0 0 30 2 *"``, a past year)."""


def next_date(schedule: str, after: datetime) -> datetime:
    """The first time ``schedule`` fires after ``after``, or :class:`ScheduleEnded`."""
    try:
        return croniter(schedule, after).get_next(datetime)
    except CroniterError as exc:  # croniter's "failed to find next date" (a ValueError)
        raise ScheduleEnded(f"schedule {schedule!r} has no time after "
                            f"{after.isoformat(timespec='seconds')}: {exc}") from exc


def check_schedule(schedule: Any) -> str:
    """The schedule, or ``RunInputError`` naming it and the form it takes: a cron
    expression with a time still to come."""
    if not isinstance(schedule, str) or not croniter.is_valid(schedule):
        raise RunInputError(f"schedule {schedule!r} is not a cron expression such as "
                            "'0 3 * * *' (minute hour day month weekday, UTC)",
                            errors={"schedule": "a cron expression"})
    try:
        next_date(schedule, timezone.now())
    except ScheduleEnded:
        raise RunInputError(
            f"schedule {schedule!r} never fires from now on (a day the month lacks, or a "
            "year gone by); give one with a time to come, such as '0 3 * * *'",
            errors={"schedule": "a cron expression that fires again"}) from None
    return schedule


def cron_create(*, assistant_id: str, schedule: str, user: User, thread: Thread | None,
                payload: dict[str, Any], metadata: dict[str, Any] | None = None,
                end_time: datetime | None = None, enabled: bool = True) -> Cron:
    """A new cron of an assistant (or graph), first due at the schedule's next time; past
    ``PLANWATCH_MAX_CRONS_PER_USER`` of the user's, :class:`LimitReached`."""
    resolved = assistant_resolve(assistant_id=assistant_id)
    check_schedule(schedule)
    cap = planwatch_setting("MAX_CRONS_PER_USER")
    if user.is_authenticated and Cron.objects.filter(user=user).count() >= cap:
        raise LimitReached(
            f"{user.get_username()} has {cap} crons, PLANWATCH_MAX_CRONS_PER_USER; delete one "
            "(DELETE /runs/crons/<id>) or ask for a higher limit",
            limit="PLANWATCH_MAX_CRONS_PER_USER")
    now = timezone.now()
    return Cron.objects.create(
        assistant_id=str(resolved.assistant.id) if resolved.assistant else resolved.spec.name,
        thread=thread, schedule=schedule, payload=payload, metadata=metadata or {},
        end_time=end_time, enabled=enabled, next_run_date=next_date(schedule, now),
        user=user if user.is_authenticated else None)


def cron_update(*, cron: Cron, schedule: str | None = None,
                payload: dict[str, Any] | None = None, metadata: dict[str, Any] | None = None,
                end_time: datetime | None = None, enabled: bool | None = None) -> Cron:
    """Change a cron: a new schedule sets its next run date from now."""
    if schedule is not None:
        cron.schedule = check_schedule(schedule)
        cron.next_run_date = next_date(schedule, timezone.now())
        cron.broken_at = None  # a schedule that fires again mends a broken cron
    if payload:
        cron.payload = {**cron.payload, **payload}
    if metadata is not None:
        cron.metadata = {**cron.metadata, **metadata}
    if end_time is not None:
        cron.end_time = end_time
    if enabled is not None:
        cron.enabled = enabled
    cron.save()
    return cron


def cron_delete(*, cron: Cron) -> None:
    """Delete a cron (the runs it started stay)."""
    cron.delete()


def due(now: datetime) -> QuerySet[Cron]:
    """Enabled, unbroken crons whose next run date has come and whose end time has not."""
    return Cron.objects.filter(enabled=True, broken_at__isnull=True,
                               next_run_date__lte=now).filter(
        Q(end_time__isnull=True) | Q(end_time__gt=now))


def cron_fire_due(*, now: datetime | None = None) -> list[Run]:
    """Start one run for every due cron this process claims; the runs started.

    A cron runs as its user, checked at each fire (:func:`dashboard.policy.cron_may_fire`):
    a cron whose user is gone, inactive or lost ``start_run`` starts nothing; its due time
    passes and ``last_error`` says why (so it starts again once the user may)."""
    now = now or timezone.now()
    started = []
    for cron in due(now).select_related("thread", "user"):
        try:
            following = next_date(cron.schedule, now)
        except ScheduleEnded as exc:
            cron_break(cron=cron, reason=str(exc), now=now)
            continue
        claimed = Cron.objects.filter(id=cron.id, next_run_date=cron.next_run_date).update(
            next_run_date=following, last_run_date=now, updated_at=now)
        if not claimed:
            continue  # another process fired it
        if why := policy.cron_may_fire(cron):
            logger.warning("cron %s skipped: %s", cron.id, why)
            Cron.objects.filter(id=cron.id).update(last_error=f"skipped: {why}")
            continue
        try:
            run = _start(cron)
        except DatabaseError:
            raise  # the poll's connection is in doubt: poll_once drops it
        except ServiceError as exc:
            logger.warning("cron %s could not start its run: %s", cron.id, exc)
            Cron.objects.filter(id=cron.id).update(last_error=str(exc))
            continue
        except Exception as exc:  # one cron's fault (a deleted assistant…) stops no other
            logger.warning("cron %s could not start its run", cron.id, exc_info=True)
            Cron.objects.filter(id=cron.id).update(last_error=f"{type(exc).__name__}: {exc}")
            continue
        Cron.objects.filter(id=cron.id).update(last_run=run, last_error="")
        started.append(run)
    return started


def cron_break(*, cron: Cron, reason: str, now: datetime) -> None:
    """Mark a cron broken (skipped until its schedule is changed), saying why."""
    logger.warning("cron %s is broken and skipped: %s", cron.id, reason)
    Cron.objects.filter(id=cron.id, broken_at__isnull=True).update(
        broken_at=now, last_error=reason, updated_at=now)


def _start(cron: Cron) -> Run:
    """Start the cron's run request, as ``POST /threads/<id>/runs`` would."""
    resolved = assistant_resolve(assistant_id=cron.assistant_id)
    user: User = cron.user if cron.user is not None else AnonymousUser()
    if resolved.assistant is not None and not policy.may_read(
            user, resolved.assistant.created_by_id):
        raise RunInputError(f"assistant {resolved.assistant.id} is not its user's to run",
                            errors={"assistant_id": "not yours"})
    payload = cron.payload or {}
    configurable = {**(resolved.config.get("configurable") or {}),
                    **((payload.get("config") or {}).get("configurable") or {})}
    if why := reserved_config({"configurable": configurable}):  # rows from before the rule
        raise RunInputError(why, errors={"config.configurable": "reserved keys"})
    thread = cron.thread or services.thread_create(user=user, thread_id=uuid.uuid4(),
                                                   metadata={"cron_id": str(cron.id)})
    req = RunRequest(
        assistant_id=resolved.spec.name, input=payload.get("input"),
        configurable=configurable,
        context={**resolved.context, **(payload.get("context") or {})},
        metadata={**(payload.get("metadata") or {}), "cron_id": str(cron.id)},
        interrupt_before=list(payload.get("interrupt_before") or []),
        interrupt_after=list(payload.get("interrupt_after") or []),
        multitask_strategy=str(payload.get("multitask_strategy") or "enqueue"),
        **run_assistant_fields(resolved))
    return start(thread, req, user, thread.latest_run()).langgraph_run.run


def poll_once() -> list[Run]:
    """One poll: fire the due crons; on a database error drop this thread's connection
    (the next poll draws a fresh one) and start nothing."""
    close_old_connections()  # one a previous poll left broken (or past CONN_MAX_AGE)
    try:
        return cron_fire_due()
    except DatabaseError:
        logger.warning("firing due crons failed; trying again next poll", exc_info=True)
        return []
    finally:
        # psycopg's "the connection is closed" would otherwise stay; and a pooled
        # connection goes back to the pool between polls
        connection.close()


async def apoll_forever() -> None:
    """Fire due crons every ``CRON_POLL_SECONDS`` (run on the executor's loop), and prune
    by ``PLANWATCH_RETENTION_DAYS`` when an hour has passed."""
    while True:
        duty_beat("crons")
        try:
            await sync_to_async(poll_once)()
        except Exception:
            logger.warning("firing due crons failed", exc_info=True)
        try:
            await sync_to_async(retention.prune_periodically)()
        except Exception:
            logger.warning("the periodic prune failed", exc_info=True)
        await asyncio.sleep(planwatch_setting("CRON_POLL_SECONDS"))


def start_scheduler() -> None:
    """Poll for due crons in this process, beside its executor."""
    from dashboard.runs.dispatch import get_executor

    get_executor().spawn(apoll_forever())
