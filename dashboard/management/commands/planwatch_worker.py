"""Run a scale-out worker: procrastinate's worker on Planwatch's queue."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    """``manage.py planwatch_worker`` (needs PostgreSQL and PLANWATCH_EXECUTOR=procrastinate)."""

    help = (
        "Execute runs dispatched through procrastinate, many at once "
        "(PLANWATCH_MAX_CONCURRENT_RUNS), on any number of hosts."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        """Check the configuration, then hand over to ``manage.py procrastinate worker``."""
        if settings.PLANWATCH["EXECUTOR"] != "procrastinate":
            raise CommandError(
                "PLANWATCH_EXECUTOR is not 'procrastinate': runs execute inside the web "
                "server. Set PLANWATCH_EXECUTOR=procrastinate (and a PostgreSQL DATABASE_URL) "
                "on the web servers and the workers."
            )
        call_command(
            "procrastinate", "worker", "--queues", "planwatch",
            "--concurrency", str(settings.PLANWATCH["MAX_CONCURRENT_RUNS"]),
        )
