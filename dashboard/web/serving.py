"""Serving: one daphne in this process, or N daphnes on one listening socket, kept running.

:func:`serve_here` runs daphne in this process (on a host and port, or on a socket it
inherited), with this process's executor, reaper and cron scheduler; when daphne stops
(SIGTERM, SIGINT: drained first, see :mod:`~dashboard.web.draining`) its executor is
drained: each run it holds is left at its next node boundary (within
``PLANWATCH_DRAIN_SECONDS``, else cancelled where it is) and released, for another
process to take over at once from its last checkpoint.

:class:`Supervisor` (``manage.py serve --processes N``) binds the socket once and starts N
children (``manage.py serve --fd <fd>``) that share it (the kernel hands each connection
to one of them), restarts a child that dies, answers SIGTERM by passing it on and waiting
at most ``stop_timeout`` seconds (then SIGKILL), answers SIGHUP by restarting the children
one after another (a new one ready before the old one is stopped: a rolling restart), and
says when ``/readyz`` first answers.
"""

from __future__ import annotations

import importlib
import ipaddress
import logging
import math
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
from django.urls import get_resolver
from prometheus_client import multiprocess

from dashboard import heap
from dashboard.duties import duties_start
from dashboard.runs import dispatch
from dashboard.runs.conf import planwatch_setting
from dashboard.web.draining import DrainingServer

logger = logging.getLogger("planwatch.serve")

BACKLOG = 1024
"""Connections the listening socket queues until daphne accepts them. Twisted's default
is 50: two hundred SDK clients that connect at once overflow it (the kernel drops their
handshakes and they retry a second later, or fail); uvicorn's default is 2048."""

APPLICATION = "config.asgi:application"
"""The ASGI application daphne serves."""

READY_FILE = "PLANWATCH_READY_FILE"
"""The variable naming the file a served process creates once it serves (its executor,
reaper and scheduler started): the supervisor's rolling restart waits for it."""

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


class DrainingCommandLine(CommandLineInterface):  # type: ignore[misc]  # daphne is untyped
    """daphne's command line, with a server that drains on SIGTERM and whose access log
    carries no secrets."""

    server_class = DrainingServer


def handshake_seconds() -> int:
    """How long a websocket's opening handshake may take: longer than a request waits for a
    database connection (``DB_WAIT_SECONDS``), so a socket whose session cannot be read
    while the database is away is answered "try again later" (``WebsocketGate``), not cut
    by daphne first (its default, 5 s, equals that wait: the page's console showed a
    handshake reset on every reconnect during an outage)."""
    return math.ceil(settings.DB_WAIT_SECONDS) + 5


def serve_here(*, host: str = "127.0.0.1", port: int = 8000, fd: int | None = None) -> None:
    """Serve in this process until daphne stops, then drain this process's executor."""
    duties_start()  # before it serves (the application would on its first connection)
    load_application()
    heap.settle()  # what it loaded lives as long as the process: no collection walks it
    if ready := os.environ.get(READY_FILE):
        from twisted.internet import reactor

        reactor.callWhenRunning(Path(ready).touch)
    if fd is None:
        (endpoint,) = build_endpoint_description_strings(host=host, port=port)
        endpoint = f"{endpoint}:backlog={BACKLOG}"
    else:
        (endpoint,) = build_endpoint_description_strings(file_descriptor=fd)
    try:
        DrainingCommandLine().run(["-e", endpoint, "--websocket_connect_timeout",
                                   str(handshake_seconds()), APPLICATION])
    finally:
        # its runs go on in another process, from the node boundary where they were left
        # (or their last checkpoint: a run cancelled mid-step saves no part of the step)
        dispatch.drain_executor(planwatch_setting("DRAIN_SECONDS"))


def load_application() -> None:
    """Import what serving needs before the first request would: the ASGI application
    (daphne imports the same module) and every view the URLconf names."""
    importlib.import_module(APPLICATION.partition(":")[0])
    get_resolver().url_patterns  # noqa: B018  (imports the views)


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
        self.rolling = threading.Event()  # SIGHUP: restart the children one by one
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
        signal.signal(signal.SIGHUP, lambda *_: self.rolling.set())
        for slot in range(self.processes):
            self._start(slot)
        threading.Thread(target=self._say_ready, daemon=True).start()
        try:
            while not self.stopping.wait(0.2):
                self._restart_dead()
                if self.rolling.is_set():
                    self.rolling.clear()
                    self._roll()
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

    def _start(self, slot: int) -> subprocess.Popen[bytes]:
        assert self.sock is not None
        fd = self.sock.fileno()
        manage = Path(settings.BASE_DIR) / "manage.py"
        ready = Path(self.env["PROMETHEUS_MULTIPROC_DIR"]) / f"ready-{slot}-{time.time_ns()}"
        child = subprocess.Popen([sys.executable, str(manage), "serve", "--fd", str(fd)],
                                 pass_fds=(fd,), env={**self.env, READY_FILE: str(ready)})
        child.ready_file = ready  # type: ignore[attr-defined]
        self.children[slot] = child
        self.started_at[slot] = time.monotonic()
        self._say(f"web process {slot + 1}/{self.processes} started (pid {child.pid})")
        return child

    def _roll(self) -> None:
        """Restart the children one after another: a new one serves on the socket before
        the old one is told to stop (SIGTERM: it drains, its runs are taken over)."""
        self._say(f"rolling restart of {self.processes} web processes")
        for slot, old in enumerate(list(self.children)):
            new = self._start(slot)
            deadline = time.monotonic() + 120
            while not new.ready_file.exists():  # type: ignore[attr-defined]
                if self.stopping.wait(0.1):  # _stop_all stops the new one with the others
                    self._stop([old] if old is not None and old.poll() is None else [])
                    return
                if new.poll() is not None or time.monotonic() > deadline:
                    self._say(f"web process {slot + 1} (pid {new.pid}) did not get ready: "
                              "rolling restart stopped")
                    self._stop([new] if new.poll() is None else [])
                    self.children[slot] = old
                    return
            new.ready_file.unlink(missing_ok=True)  # type: ignore[attr-defined]
            if old is not None and old.poll() is None:
                self._stop([old])
        self._say("rolling restart done")

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
        self._stop(live)

    def _stop(self, live: list[subprocess.Popen[bytes]]) -> None:
        """SIGTERM these children, wait at most ``stop_timeout`` seconds, then SIGKILL."""
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
