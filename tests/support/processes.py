"""Planwatch processes of the tests' own on the test database, killed and restarted at
will: ``manage.py`` commands (a worker, an executor) and a daphne on a port it keeps.

Each knows the test graphs (tests.graphs) and notices a dead owner within seconds
(heartbeat 0.3 s, stale after 1.5 s). Their output lands in tests/artifacts/.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

from tests.conftest import ARTIFACTS, ROOT, database_url, free_port, wait_serving


def process_env(**env: str) -> dict[str, str]:
    """This process's environment for a subprocess on the test database, ``env`` added."""
    return {
        **os.environ, "DATABASE_URL": database_url(connection.settings_dict),
        "PLANWATCH_GRAPH_MODULES": "tests.graphs", "PLANWATCH_THINK_TIME": "0",
        "PLANWATCH_HEARTBEAT_SECONDS": "0.3", "PLANWATCH_STALE_AFTER_SECONDS": "1.5",
        "PYTHONUNBUFFERED": "1", **env,
    }


def spawn(args: list[str], name: str, **env: str) -> subprocess.Popen:
    """A manage.py subprocess on the test database that knows the test graphs."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = (ARTIFACTS / f"{name}.log").open("w")
    return subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT,
                            env=process_env(**env), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc`` and the processes it started (its session), then reap it."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


class Daphne:
    """``manage.py serve`` on a fixed port, killable and restartable."""

    def __init__(self, port: int, **env: str) -> None:
        self.port = port
        self.env = process_env(**env)
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        """Its base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start it (again), answering once ``/healthz`` does."""
        self.starts += 1
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        log = (ARTIFACTS / f"faults-daphne-{self.port}-{self.starts}.log").open("w")
        # one web process (PostgreSQL's default is the cores): the socket is open before
        # a web process answers on it: started when /healthz answers (wait_serving)
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port",
             str(self.port), "--processes", "1"], cwd=ROOT, env=self.env, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
        assert wait_serving(self.proc, self.port), f"daphne did not start; see {log.name}"

    def kill(self) -> None:
        """SIGKILL it and what it started, as a crash would."""
        if self.proc and self.proc.poll() is None:
            kill(self.proc)

    def stop(self) -> None:
        """Stop it as an operator would (SIGTERM), killing it after 10 s."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def daphne(**env: str) -> Iterator[Daphne]:
    """A started :class:`Daphne` on a free port (``env`` added), stopped at the end."""
    server = Daphne(free_port(), **env)
    server.start()
    try:
        yield server
    finally:
        server.stop()
