"""Serve Planwatch with daphne, with this process's executor running and recovering runs."""

from __future__ import annotations

from typing import Any

from daphne.cli import CommandLineInterface
from daphne.endpoints import build_endpoint_description_strings
from django.core.management.base import BaseCommand

from dashboard import crons
from dashboard.runs import dispatch
from dashboard.web.accesslog import RedactingServer

BACKLOG = 1024
"""Connections the listening socket queues until daphne accepts them. Twisted's default
is 50: two hundred SDK clients that connect at once overflow it (the kernel drops their
handshakes and they retry a second later, or fail); uvicorn's default is 2048."""


class RedactingCommandLine(CommandLineInterface):  # type: ignore[misc]  # daphne is untyped
    """daphne's command line, with a server whose access log carries no secrets."""

    server_class = RedactingServer


class Command(BaseCommand):
    """``manage.py serve [--host 127.0.0.1] [--port 8000]``."""

    help = "Serve the dashboard (HTTP + websockets) with daphne; runs execute in-process."

    def add_arguments(self, parser: Any) -> None:
        """Accept host and port."""
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args: Any, host: str, port: int, **options: Any) -> None:
        """Start the executor (it picks up orphaned runs), then daphne in this process."""
        if dispatch.in_process():
            dispatch.start_reaper()
        crons.start_scheduler()  # in every web process: a due cron is claimed once
        self.stdout.write(f"Planwatch on http://{host}:{port}/ (Ctrl-C stops it)")
        (endpoint,) = build_endpoint_description_strings(host=host, port=port)
        RedactingCommandLine().run(["-e", f"{endpoint}:backlog={BACKLOG}",
                                    "config.asgi:application"])
