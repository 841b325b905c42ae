"""Serving: one daphne in this process, or N daphnes on one listening socket, kept running.

:func:`serve_here` runs daphne in this process (on a host and port, or on a socket it
inherited), with this process's executor, reaper and cron scheduler; when daphne stops
(SIGTERM, SIGINT) the process exits: runs it held are taken over by another process
once their heartbeat is stale (``PLANWATCH_STALE_AFTER_SECONDS``).

:class:`Supervisor` (``manage.py serve --processes N``) binds the socket once and starts N
children (``manage.py serve --fd <fd>``) that share it (the kernel hands each connection
to one of them), restarts a child that dies, answers SIGTERM by passing it on and waiting
at most ``stop_timeout`` seconds (then SIGKILL), and says when ``/readyz`` first answers.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Protocol

from daphne.cli import CommandLineInterface
from daphne.endpoints import build_endpoint_description_strings
from django.conf import settings
from prometheus_client import multiprocess

from dashboard import crons, deadlines
from dashboard.runs import dispatch
from dashboard.web.accesslog import RedactingServer

logger = logging.getLogger("planwatch.serve")

BACKLOG = 1024
"""Connections the listening socket queues until daphne accepts them. Twisted's default
is 50: two hundred SDK clients that connect at once overflow it (the kernel drops their
handshakes and they retry a second later, or fail); uvicorn's default is 2048."""

RESTART_PAUSE = 1.0
"""Seconds before a child that died is started again (doubling while it keeps dying
within :data:`RESTART_PAUSE_MAX` of its start, up to that)."""
RESTART_PAUSE_MAX = 30.0


class Output(Protocol):
    """Where the supervisor says what it does (a command's stdout)."""

    def write(self, text: str) -> Any:
        """Write ``text``."""

    def flush(self) -> None:
        """Send what was written."""


class RedactingCommandLine(CommandLineInterface):  # type: ignore[misc]  # daphne is untyped
    """daphne's command line, with a server whose access log carries no secrets."""

    server_class = RedactingServer


def serve_here(*, host: str = "127.0.0.1", port: int = 8000, fd: int | None = None) -> None:
    """Serve in this process until daphne stops, then stop this process's executor."""
    if dispatch.in_process():
        dispatch.start_reaper()
    crons.start_scheduler()  # in every web process: a due cron is claimed once
    deadlines.start_poller()  # notices and deadlines, each claimed once, the same way
    if fd is None:
        (endpoint,) = build_endpoint_description_strings(host=host, port=port)
        endpoint = f"{endpoint}:backlog={BACKLOG}"
    else:
        (endpoint,) = build_endpoint_description_strings(file_descriptor=fd)
    # When daphne stops (SIGTERM) the process exits with its executor's thread, as if
    # killed: the runs it held are taken over from their last checkpoint once their
    # heartbeat is stale. Stopping the executor first (cancelling the runs) is not done: a
    # run cancelled mid-step was seen to be finished by its recovery with a partial state.
    RedactingCommandLine().run(["-e", endpoint, "config.asgi:application"])


def readyz_url(host: str, port: int) -> str:
    """The ``/readyz`` of a server listening on ``host:port`` (an IPv6 host bracketed)."""
    host = host.strip("[]")
    return f"http://[{host}]:{port}/readyz" if ":" in host else f"http://{host}:{port}/readyz"


def wait_ready(url: str, *, timeout: float, alive: Any = None) -> bool:
    """Poll ``url`` (a ``/readyz``) until it answers 200, ``timeout`` passes or ``alive()``
    says the server is gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            return False
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    return False


def check_processes(processes: int, *, host: str) -> None:
    """Refuse a number of processes this configuration cannot serve with (ValueError)."""
    if processes < 1:
        raise ValueError(f"--processes {processes}: give 1 or more")
    if processes == 1:
        return
    if not settings.IS_POSTGRES:
        raise ValueError(
            f"--processes {processes} needs PostgreSQL: on SQLite runs execute inside the one "
            "web process (set DATABASE_URL=postgres://… to serve from several)")
    if ipaddress.ip_address(socket.gethostbyname(host)).version != 4:
        raise ValueError(f"--processes {processes} serves an IPv4 address, not {host!r}")


def default_processes() -> int:
    """One process on SQLite (runs execute inside it); the cores on PostgreSQL."""
    return (os.cpu_count() or 1) if settings.IS_POSTGRES else 1


class Supervisor:
    """N daphne children on one listening socket, each restarted when it dies."""

    def __init__(self, *, host: str, port: int, processes: int, out: Output,
                 stop_timeout: float = 30.0) -> None:
        self.host, self.port, self.processes = host, port, processes
        self.out = out
        self.stop_timeout = stop_timeout
        self.children: list[subprocess.Popen[bytes] | None] = [None] * processes
        self.started_at = [0.0] * processes
        self.pause = [RESTART_PAUSE] * processes
        self.stopping = threading.Event()
        self.sock: socket.socket | None = None
        self.env: dict[str, str] = {}

    def run(self) -> int:
        """Bind, start the children, keep them running until SIGTERM/SIGINT; exit status."""
        self.sock = socket.create_server((self.host, self.port), backlog=BACKLOG)
        self.sock.set_inheritable(True)
        self.env = {**os.environ, "PLANWATCH_PROCESS_ROLE": "web",
                    "PROMETHEUS_MULTIPROC_DIR": self._metrics_dir()}
        # this process serves nothing: its own (idle) gauges are no web process's
        self._forget(os.getpid())
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self.stopping.set())
        for slot in range(self.processes):
            self._start(slot)
        threading.Thread(target=self._say_ready, daemon=True).start()
        try:
            while not self.stopping.wait(0.2):
                self._restart_dead()
        finally:
            self._stop_all()
            self.sock.close()
        return 0

    def _metrics_dir(self) -> str:
        """The children's ``PROMETHEUS_MULTIPROC_DIR``: the environment's (the operator's to
        empty), else ``var/prometheus/<port>/`` emptied now."""
        if given := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            return given
        path = Path(settings.VAR_DIR) / "prometheus" / str(self.port)
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return str(path)

    def _start(self, slot: int) -> None:
        assert self.sock is not None
        fd = self.sock.fileno()
        manage = Path(settings.BASE_DIR) / "manage.py"
        child = subprocess.Popen([sys.executable, str(manage), "serve", "--fd", str(fd)],
                                 pass_fds=(fd,), env=self.env)
        self.children[slot] = child
        self.started_at[slot] = time.monotonic()
        self._say(f"web process {slot + 1}/{self.processes} started (pid {child.pid})")

    def _restart_dead(self) -> None:
        for slot, child in enumerate(self.children):
            if child is None or child.poll() is None:
                continue
            self._forget(child.pid)
            lived = time.monotonic() - self.started_at[slot]
            self.pause[slot] = (min(self.pause[slot] * 2, RESTART_PAUSE_MAX)
                                if lived < RESTART_PAUSE_MAX else RESTART_PAUSE)
            self._say(f"web process {slot + 1} (pid {child.pid}) exited with "
                      f"{child.returncode}; starting another in {self.pause[slot]:g} s")
            self.children[slot] = None
            if self.stopping.wait(self.pause[slot]):
                return
            self._start(slot)

    def _forget(self, pid: int) -> None:
        """Drop a process's per-process gauges from the metrics (it is gone, or serves none)."""
        multiprocess.mark_process_dead(pid, self.env["PROMETHEUS_MULTIPROC_DIR"])

    def _stop_all(self) -> None:
        """SIGTERM every child, wait at most ``stop_timeout`` seconds, then SIGKILL."""
        live = [child for child in self.children if child is not None and child.poll() is None]
        self._say(f"stopping {len(live)} web processes (at most {self.stop_timeout:g} s)")
        for child in live:
            child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        for child in live:
            try:
                child.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._say(f"web process pid {child.pid} did not stop in time: killed")
                child.kill()
                child.wait()
            self._forget(child.pid)

    def _say_ready(self) -> None:
        url = readyz_url(self.host, self.port)
        if wait_ready(url, timeout=120, alive=lambda: not self.stopping.is_set()):
            self._say(f"Planwatch ready on http://{self.host}:{self.port}/ "
                      f"({self.processes} web processes)")
        elif not self.stopping.is_set():
            self._say(f"{url} did not answer 200 within 120 s: see the processes' logs")

    def _say(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()
