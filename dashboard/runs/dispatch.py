"""Dispatching runs: hand a run to an executor, and hand out again those a dead one left.

This process's executor is made here, with :func:`dispatch_queued_after` as its
``on_stopped``: a run that stops hands on the runs waiting on it.

In-process (the embedded default) the run goes to this process's executor; with
``PLANWATCH_EXECUTOR=procrastinate`` it becomes a job that any worker's executor takes
(the job is deferred by its task's name, so dispatching needs no import of the worker's
code). Either way the executor's claim decides whether the run is really its to run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any
from uuid import UUID

from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from dashboard.compiled import compiled_once
from dashboard.models import LangGraphRun, Run
from dashboard.runs import doorbells, states, store
from dashboard.runs.conf import planwatch_setting
from dashboard.runs.executor import Executor, ExecutorHealth
from planner.registry import all_graphs

logger = logging.getLogger("planwatch.runs")

EXECUTE_RUN = "planwatch.execute_run"
"""The procrastinate task that executes a run (:mod:`dashboard.runs.jobs`)."""
QUEUE = "planwatch"


_executor: Executor | None = None
_executor_lock = threading.Lock()


def get_executor() -> Executor:
    """This process's executor, started on first use; each run it stops executing is
    rolled back if a client asked, then hands on the runs waiting on it
    (:func:`after_stopped`)."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = Executor(on_stopped=after_stopped)
        _executor.start()
        return _executor


def reset_executor() -> None:
    """Stop this process's executor (tests; settings changes)."""
    global _executor
    with _executor_lock:
        if _executor is not None:
            _executor.stop()
            _executor = None


def drain_executor(grace: float) -> int:
    """Stop this process's executor as a stopping process does (see ``Executor.drain``):
    how many runs it left for another process to take over."""
    executor = _executor
    if executor is None:
        return 0
    left = executor.drain(grace)
    logger.info("executor stopped: %d runs left for another process to take over", left)
    return left


def executor_health() -> ExecutorHealth | None:
    """This process's executor's health; None if none was started (it starts on first use)."""
    executor = _executor
    return None if executor is None else executor.health()


def in_process() -> bool:
    """Whether runs execute inside this process (not in procrastinate workers)."""
    return bool(planwatch_setting("EXECUTOR") != "procrastinate")


def dispatch(run_id: UUID, mode: str) -> None:
    """Hand a run to the configured executor; ``mode`` is start, resume or recover."""
    if in_process():
        get_executor().submit(run_id, mode)
        return
    from procrastinate.contrib.django import app
    from procrastinate.exceptions import AlreadyEnqueued

    # a job for the same run and purpose may wait already: that one will do
    with contextlib.suppress(AlreadyEnqueued):
        app.configure_task(
            EXECUTE_RUN, queue=QUEUE, lock=f"run:{run_id}",
            queueing_lock=f"run:{run_id}:{mode}",
        ).defer(run_id=str(run_id), mode=mode)


def request_cancel(run_id: UUID) -> None:
    """Have the executor that holds a run cancel it at once: this process's, or a worker's
    (its job aborted: procrastinate's NOTIFY reaches it at once; its heartbeat, which
    reads the run's cancel request, is the fallback)."""
    if in_process():
        get_executor().request_cancel(run_id)
        return
    try:
        abort_run_job(run_id)
    except Exception:  # the heartbeat still brings the cancel to the worker
        logger.warning("aborting run %s's job failed", run_id, exc_info=True)


def abort_run_job(run_id: UUID) -> bool:
    """Abort the job executing ``run_id`` in a worker (an operator cancelled the run);
    whether one was executing it. The worker hears it by LISTEN/NOTIFY, within
    milliseconds; its heartbeat would learn of the cancel only at its next beat."""
    from procrastinate.contrib.django import app

    doing = app.job_manager.list_jobs(task=EXECUTE_RUN, status="doing", lock=f"run:{run_id}")
    return any([app.job_manager.cancel_job_by_id(job.id, abort=True)
                for job in doing if job.id is not None])


def request_breakpoints(run_id: UUID) -> None:
    """Tell this process's executor a run it holds has new breakpoints (workers: heartbeat)."""
    if in_process():
        get_executor().request_breakpoints(run_id)


def after_stopped(run_id: UUID) -> None:
    """A run this process's executor held stopped: the LangGraph run of it a client asked
    to roll back is rolled back (:func:`roll_back_stopped`), then the runs waiting on it go
    on (:func:`dispatch_queued_after`), from where the rollback left the thread. One query
    first says whether either has anything to do: most runs stop with neither."""
    with connection.cursor() as cursor:
        cursor.execute(*_after_stopped_sql(run_id))
        found = cursor.fetchone()
    if found is not None and not found[1] and not found[2]:
        return
    thread = found[0] if found is not None else None
    roll_back_stopped(run_id)
    dispatch_queued_after(run_id, thread=thread)


@compiled_once
def _after_stopped_sql(run_id: UUID) -> QuerySet[Any, Any]:
    """:func:`after_stopped`'s question (compiling it was most of a run's stop): the run's
    thread, whether a LangGraph run of it is to be rolled back, whether runs wait on it."""
    return Run.objects.filter(id=run_id).annotate(
        rolling_back=Exists(LangGraphRun.objects.to_roll_back().filter(run=OuterRef("pk"))),
        waiting=Exists(Run.objects.filter(
            Q(waits_for=OuterRef("pk"), state=Run.State.QUEUED)
            | Q(conversation=OuterRef("conversation"),
                state__in=[Run.State.QUEUED, *states.RESUME.moves])))
    ).values_list("conversation_id", "rolling_back", "waiting")[:1]


def roll_back_stopped(run_id: UUID) -> str:
    """Roll back the LangGraph run of ``run_id`` a client asked to roll back, if the run
    has stopped (:func:`store.roll_back_requested`: exactly once, whoever sees it stop
    first); once that commits, a run that waits again is told to its watchers, the runs
    list and the inbox (its question is open again). What was done (``""``: nothing)."""
    done = store.roll_back_requested(run_id)
    if done == store.ROLLED_BACK:
        transaction.on_commit(lambda: _tell(run_id))
    return done


def _tell(run_id: UUID) -> None:
    """The run as it stands now, to its watchers and the runs list, and the inbox."""
    row = Run.objects.values(*doorbells.SUMMARY_FIELDS).filter(id=run_id).first()
    if row is None:
        return
    try:
        async_to_sync(doorbells.abroadcast_run)(doorbells.run_summary(row))
        async_to_sync(doorbells.abroadcast_inbox)()
    except RuntimeError:  # called from inside an event loop thread
        logger.debug("rollback of %s not told (inside an event loop)", run_id)


def dispatch_queued_after(run_id: UUID, *, thread: UUID | None = None) -> None:
    """Hand the runs waiting on ``run_id``'s thread (``thread``, if the run is gone) to an
    executor: those enqueued behind it (LangGraph's multitask "enqueue") and those whose
    claim found it running (one run of a thread executes at a time); each claim checks
    again."""
    thread = Run.objects.filter(id=run_id).values_list(
        "conversation_id", flat=True).first() or thread
    waiting = Q(waits_for_id=run_id, state=Run.State.QUEUED)
    if thread is not None:
        waiting |= Q(conversation_id=thread, state=Run.State.QUEUED)
    for queued in Run.objects.filter(waiting).order_by("created_at").values_list(
            "id", flat=True):
        dispatch(queued, "start")
    if thread is not None:  # an answer recorded while another run of the thread executed
        for answered in Run.objects.filter(conversation_id=thread, state__in=list(
                states.RESUME.moves)).values_list("id", flat=True):
            dispatch(answered, "resume")



def recover_stale(*, include_queued: bool = False) -> list[UUID]:
    """Dispatch again every run whose executor stopped heart-beating, or released it, once
    the rollbacks asked of runs that stopped or whose executor died are done (a crash
    between a cancel with ``action=rollback`` and the run's stop forgets nothing).

    ``include_queued`` also dispatches runs still queued (at start-up: their dispatch may
    have died with the process that created them). Only runs of graphs this process has:
    a process serving other graphs (another langgraph.json) would fail a run it cannot
    build, where one that has its graph recovers it.
    """
    stale = store.stale_before(timezone.now())
    # rollbacks asked of runs that stopped, or whose executor died, before it did them
    dead = Q(run__state=Run.State.RUNNING) & (Q(run__heartbeat_at__lt=stale) | Q(run__owner=""))
    for rolled in LangGraphRun.objects.to_roll_back().filter(
            dead | Q(run__state__in=states.states(busy=False))).values_list("run_id", flat=True):
        try:
            roll_back_stopped(rolled)
        except Exception:  # the others are rolled back, and recovered, all the same
            logger.warning("rolling back a LangGraph run of %s failed", rolled, exc_info=True)
    known = [spec.name for spec in all_graphs()]
    ids = list(
        Run.objects.running().filter(Q(heartbeat_at__lt=stale) | Q(owner=""), graph__in=known)
        .values_list("id", flat=True)
    )
    for run_id in ids:
        dispatch(run_id, "recover")
    if include_queued:
        for run_id in Run.objects.filter(state=Run.State.QUEUED, graph__in=known
                                         ).values_list("id", flat=True):
            dispatch(run_id, "start")
    return ids


def start_reaper() -> None:
    """Recover, now and periodically, the runs of dead executors (in-process mode)."""
    get_executor().spawn(_areap_forever())


async def _areap_forever() -> None:
    include_queued = True  # at start-up, runs queued by a process that died
    while True:
        try:
            await sync_to_async(recover_stale)(include_queued=include_queued)
            include_queued = False
        except Exception:
            logger.warning("recovering stale runs failed", exc_info=True)
        await asyncio.sleep(max(1.0, planwatch_setting("STALE_AFTER_SECONDS") / 3))
