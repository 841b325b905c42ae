"""procrastinate jobs for the scale-out executor (imported only on PostgreSQL).

A run is executed by the worker process's own :class:`~dashboard.runs.execute.Executor`,
so a worker runs many runs at once on one event loop. Every job for one run carries the
lock ``run:<id>``: procrastinate never runs two of them at once, and the executor's claim
in the database makes sure of it again. Settings list this module in
``PROCRASTINATE_IMPORT_PATHS``; dispatching defers these jobs by name.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from uuid import UUID

from asgiref.sync import sync_to_async
from procrastinate.contrib.django import app

from dashboard.runs.conf import planwatch_setting
from dashboard.runs.dispatch import EXECUTE_RUN, QUEUE, recover_stale
from dashboard.runs.execute import get_executor

logger = logging.getLogger("planwatch.runs")


@app.task(name=EXECUTE_RUN, queue=QUEUE)
async def execute_run(*, run_id: str, mode: str) -> None:
    """Execute one run until it finishes, interrupts or fails."""
    await asyncio.wrap_future(get_executor().submit(UUID(run_id), mode))


# croniter reads a sixth field as seconds: every 5 s
@app.periodic(cron="* * * * * */5", periodic_id="recover")
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
