"""Serve Planwatch with daphne: one process, or ``--processes N`` on one socket."""

from __future__ import annotations

import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from dashboard.web.serving import (
    BACKLOG,
    Supervisor,
    check_processes,
    default_processes,
    readyz_url,
    serve_here,
    wait_ready,
)

__all__ = ["BACKLOG", "Command"]


class Command(BaseCommand):
    """``manage.py serve [--host 127.0.0.1] [--port 8000] [--processes N]``."""

    help = ("Serve the dashboard (HTTP + websockets) with daphne; runs execute in-process "
            "unless PLANWATCH_EXECUTOR=procrastinate. --processes N (PostgreSQL) serves from N "
            "daphnes on one socket, each restarted when it dies.")

    def add_arguments(self, parser: Any) -> None:
        """Accept host, port, the number of processes, and (for those) an inherited socket."""
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--processes", type=int, default=None,
            help="daphne processes on one socket (default: 1 on SQLite, the cores on "
                 "PostgreSQL)")
        parser.add_argument("--stop-timeout", type=float, default=30.0,
                            help="seconds the processes get to stop on SIGTERM")
        parser.add_argument("--fd", type=int, default=None,
                            help="serve on this inherited listening socket (used by "
                                 "--processes for its children)")

    def handle(self, *args: Any, host: str, port: int, processes: int | None,
               stop_timeout: float, fd: int | None, **options: Any) -> None:
        """Serve here, or supervise N processes that do."""
        if fd is not None:
            serve_here(fd=fd)
            return
        processes = default_processes() if processes is None else processes
        try:
            check_processes(processes, host=host)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if processes > 1:
            Supervisor(host=host, port=port, processes=processes, out=self.stdout,
                       stop_timeout=stop_timeout).run()
            return
        self.stdout.write(f"Planwatch on http://{host}:{port}/ (Ctrl-C stops it)")
        threading.Thread(target=self._say_ready, args=(host, port), daemon=True).start()
        serve_here(host=host, port=port)

    def _say_ready(self, host: str, port: int) -> None:
        url = readyz_url(host, port)
        if wait_ready(url, timeout=120):
            self.stdout.write(f"Planwatch ready ({url} answers 200)")
