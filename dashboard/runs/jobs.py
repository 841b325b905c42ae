"""procrastinate jobs for the scale-out executor (imported only on PostgreSQL).

A run is executed by the worker process's own :class:`~dashboard.runs.executor.Executor`,
so a worker runs many runs at once on one event loop. Every job for one run carries the
lock ``run:<id>``: procrastinate never runs two of them at once, and the executor's claim
in the database makes sure of it again. Settings list this module in
``PROCRASTINATE_IMPORT_PATHS``; dispatching defers these jobs by name.

A worker outlives its database's faults: procrastinate stops its worker when a side task
(heartbeat, periodic deferrer, LISTEN) raises, and lets a failed job fetch end it, so a
``pg_terminate_backend`` or a restart of PostgreSQL killed every worker. :class:`PromptWorker`
retries each of those with back-off instead (its running runs go on meanwhile), and
retries writing a finished job's status for a while, so the job's lock is let go. A worker
whose heartbeat lapsed (stopped, or cut off by a storm) is pruned from procrastinate's
worker table by the others; procrastinate's fetch names the worker's row, so it would fail
for ever: :class:`PromptWorker` registers again as soon as its heartbeat or a fetch finds
its row gone. :func:`arun_worker` starts the worker again when it stops on a database error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import psycopg
from asgiref.sync import sync_to_async
from procrastinate.contrib.django import app
from procrastinate.exceptions import ConnectorException
from procrastinate.job_context import AbortReason, JobContext
from procrastinate.worker import Worker

from dashboard.runs.conf import planwatch_setting
from dashboard.runs.dispatch import EXECUTE_RUN, QUEUE, get_executor, recover_stale

logger = logging.getLogger("planwatch.runs")


@app.task(name=EXECUTE_RUN, queue=QUEUE, pass_context=True)
async def execute_run(context: JobContext, *, run_id: str, mode: str) -> None:
    """Execute one run until it finishes, interrupts or fails.

    An operator's cancel in another process aborts this job (``dispatch.abort_run_job``):
    procrastinate's NOTIFY reaches this worker at once and it cancels the job's task; the
    run is then cancelled on the executor (the node in flight stopped, the cancel
    recorded) and the job ends once the run stopped. A worker that shuts down cancels the
    execution itself, as before."""
    executor = get_executor()
    execution = asyncio.wrap_future(executor.submit(UUID(run_id), mode))
    while True:
        try:
            await asyncio.shield(execution)
            return
        except asyncio.CancelledError:
            if context.abort_reason() is not AbortReason.USER_REQUEST:
                execution.cancel()
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # the abort is taken: the run stops, then the job ends
            executor.request_cancel(UUID(run_id))


# croniter reads a sixth field as seconds: every 2 s (a dead worker's runs wait for the
# stale window, then at most one sweep)
@app.periodic(cron="* * * * * */2", periodic_id="recover")
@app.task(name="planwatch.recover_runs", queue=QUEUE, queueing_lock="planwatch.recover",
          pass_context=True)
async def recover_runs(context: Any, timestamp: int) -> None:
    """Retry jobs of dead workers, and hand runs with a stale heartbeat out again."""
    stale_after = planwatch_setting("STALE_AFTER_SECONDS")
    manager = context.app.job_manager
    for job in await manager.get_stalled_jobs(
        task_name=EXECUTE_RUN, seconds_since_heartbeat=stale_after
    ):
        logger.warning("retrying job %s of a dead worker: %s", job.id, job.task_kwargs)
        await manager.retry_job(job)
    await manager.prune_stalled_workers(seconds_since_heartbeat=stale_after)
    await sync_to_async(recover_stale)()


BEAT = """SELECT procrastinate_update_heartbeat_v1(%(worker_id)s),
       EXISTS (SELECT 1 FROM procrastinate_workers WHERE id = %(worker_id)s) AS registered"""
"""A worker's heartbeat, and whether its row is still there (another may have pruned it)."""

BACKOFF_FIRST, BACKOFF_MAX = 0.1, 5.0
"""Seconds a worker waits after a database error, doubling each time up to the max."""
STATUS_WRITE_SECONDS = 30.0
"""How long a finished job's status write is retried before it is left to the sweep."""


def backoff(attempt: int) -> float:
    """Seconds to wait before the ``attempt``-th retry (0-based): 0.1, 0.2, 0.4 … 5."""
    return float(min(BACKOFF_MAX, BACKOFF_FIRST * 2.0 ** attempt))


async def aforever(name: str, step: Callable[[], Awaitable[Any]]) -> None:
    """Await ``step`` again and again: after a database error, with back-off; after it
    returns (a LISTEN whose reconnect gave up), at once."""
    attempt = 0
    while True:
        try:
            await step()
            attempt = 0
        except ConnectorException as exc:
            logger.warning("worker's %s lost the database (%s); retrying", name, exc)
            await asyncio.sleep(backoff(attempt))
            attempt += 1


class PromptWorker(Worker):
    """procrastinate's worker, woken by every job's notification, however late it comes.

    procrastinate's worker fetches jobs until none is left, then waits for a notification
    (LISTEN/NOTIFY) or its polling interval (5 s). It clears its "new job" flag after each
    fetch, so a notification that arrives while the last (empty) fetch runs is forgotten,
    and its job waits for the next poll. This worker counts notifications and fetches
    again while any arrived during a round: a new run starts when it is asked for, not
    up to five seconds later.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._notified = 0

    async def _handle_notification(self, *, channel: str, notification: Any) -> None:
        if notification.get("type") == "job_inserted":
            self._notified += 1
        await super()._handle_notification(channel=channel, notification=notification)

    async def _fetch_and_process_jobs(self) -> None:
        attempt = 0
        while True:
            seen = self._notified
            try:
                await super()._fetch_and_process_jobs()  # type: ignore[no-untyped-call]
            except ConnectorException as exc:
                # procrastinate would shut the worker down; its runs go on, it fetches again
                logger.warning("fetching a job failed (%s); fetching again", exc)
                await asyncio.sleep(backoff(attempt))
                attempt += 1
                with contextlib.suppress(ConnectorException):  # away: asked next round
                    await self._aensure_registered()
                continue
            if self._notified == seen or self._stop_event.is_set():
                return

    async def _update_heartbeat(self) -> None:
        """Beat every ``update_heartbeat_interval`` seconds, registering again when the
        worker's row is gone (procrastinate's beat updates no row then, silently)."""
        while True:
            await asyncio.sleep(self.update_heartbeat_interval)
            await self._aensure_registered()

    async def _aensure_registered(self) -> None:
        """Beat this worker's heartbeat; when another worker pruned it, register again."""
        if self.worker_id is None:
            return
        row = await self.app.connector.execute_query_one_async(
            query=BEAT, worker_id=self.worker_id)
        if row["registered"]:
            return
        pruned = self.worker_id
        self.worker_id = await self.app.job_manager.register_worker()
        logger.warning("worker %s had been pruned (its heartbeat lapsed): registered again "
                       "as worker %s", pruned, self.worker_id)

    def _start_side_tasks(self) -> list[asyncio.Task[Any]]:
        """procrastinate's side tasks, each retried after a database error (procrastinate
        stops the whole worker when one raises)."""
        heartbeat = self._update_heartbeat
        deferrer = self._periodic_deferrer
        aborts = self._poll_jobs_to_abort
        tasks = [asyncio.create_task(aforever("heartbeat", heartbeat), name="update_heartbeats"),
                 asyncio.create_task(aforever("deferrer", deferrer), name="deferrer"),
                 asyncio.create_task(aforever("abort poll", aborts), name="poll_jobs_to_abort")]
        if self.listen_notify:
            def listen() -> Awaitable[None]:
                return self.app.job_manager.listen_for_jobs(
                    on_notification=self._handle_notification, queues=self.queues)
            tasks.append(asyncio.create_task(aforever("listener", listen), name="listener"))
        return tasks

    async def _persist_job_status(self, **kwargs: Any) -> None:  # type: ignore[override]
        deadline = time.monotonic() + STATUS_WRITE_SECONDS
        attempt = 0
        while True:
            try:
                await super()._persist_job_status(**kwargs)
                return
            except ConnectorException as exc:
                if time.monotonic() > deadline:
                    raise
                logger.warning("writing job %s's status failed (%s); retrying",
                               kwargs["job"].id, exc)
                await asyncio.sleep(backoff(attempt))
                attempt += 1


async def arun_worker(*, concurrency: int) -> None:
    """Run a :class:`PromptWorker` on Planwatch's queue until it is stopped (a signal),
    starting it again, with back-off, each time it stops on a database error (PostgreSQL
    restarting or away when it starts)."""
    attempt = 0
    while True:
        try:
            await arun_worker_once(concurrency=concurrency)
            return
        except (ConnectorException, OSError, psycopg.OperationalError) as exc:
            logger.warning("the worker stopped on a database error (%s); starting again", exc)
            await asyncio.sleep(backoff(attempt))
            attempt += 1


async def arun_worker_once(*, concurrency: int) -> None:
    """Run a :class:`PromptWorker` on Planwatch's queue until it is stopped or fails."""
    from procrastinate.contrib.django import utils
    from procrastinate.psycopg_connector import PsycopgConnector

    from config.connections import QUEUE_POOL_SIZE
    from dashboard.runs.savers import aend_abandoned_transactions

    # procrastinate's get_worker_connector(), with its pool bounded (config/connections.py);
    # a transaction a stalled worker leaves open on it is ended by the server, as on the
    # executor's pools, rather than holding the rows another worker's sweep must change
    connector = PsycopgConnector(kwargs=utils.connector_params("default"), min_size=1,
                                 max_size=QUEUE_POOL_SIZE,
                                 configure=aend_abandoned_transactions)
    with app.replace_connector(connector):
        async with app.open_async():
            app.perform_import_paths()  # type: ignore[no-untyped-call]
            worker = PromptWorker(app=app, **{**app.worker_defaults, "queues": [QUEUE],
                                              "concurrency": concurrency})
            await worker.run()  # type: ignore[no-untyped-call]
