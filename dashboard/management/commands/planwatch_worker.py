"""Run a scale-out worker: procrastinate's worker on Planwatch's queue."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    """``manage.py planwatch_worker`` (needs PostgreSQL and PLANWATCH_EXECUTOR=procrastinate)."""

    help = (
        "Execute runs dispatched through procrastinate, many at once "
        "(PLANWATCH_MAX_CONCURRENT_RUNS), on any number of hosts."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        """Check the configuration, then run procrastinate's worker (woken by every
        job's notification: see :class:`dashboard.runs.jobs.PromptWorker`)."""
        if settings.PLANWATCH["EXECUTOR"] != "procrastinate":
            raise CommandError(
                "PLANWATCH_EXECUTOR is not 'procrastinate': runs execute inside the web "
                "server. Set PLANWATCH_EXECUTOR=procrastinate (and a PostgreSQL DATABASE_URL) "
                "on the web servers and the workers."
            )
        from dashboard import heap
        from dashboard.runs.jobs import arun_worker

        heap.settle()  # what it loaded lives as long as the worker: no collection walks it
        concurrency: int = settings.PLANWATCH["MAX_CONCURRENT_RUNS"]  # type: ignore[assignment]
        print(f"Launching a worker on planwatch ({concurrency} runs at once)",
              file=sys.stderr, flush=True)
        asyncio.run(arun_worker(concurrency=concurrency))
