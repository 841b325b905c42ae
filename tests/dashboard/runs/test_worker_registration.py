"""A procrastinate worker whose heartbeat lapsed (stopped past the stale window, pruned by
the others' sweep) registers again and takes runs (real worker subprocess, PostgreSQL)."""

from __future__ import annotations

import os
import signal
import time

import pytest
from django.db import connection, transaction

from dashboard import health, services
from tests.conftest import wait_run
from tests.support.processes import kill, spawn

pytestmark = [pytest.mark.pg, pytest.mark.postgres, pytest.mark.server]


def _worker_ids() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM procrastinate_workers ORDER BY id")
        return [row[0] for row in cursor.fetchall()]


def _prune(seconds: float) -> list[int]:
    """What another worker's sweep does (``recover_runs``): drop workers whose heartbeat
    is older than ``seconds``. A lock it waits on longer than 20 s fails the test by name:
    the stopped worker held one in a transaction it never ended (the test hung here once,
    before the worker's connections ended abandoned transactions)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL lock_timeout = '20s'")
        cursor.execute("SELECT * FROM procrastinate_prune_stalled_workers_v1(%s)", [seconds])
        return [row[0] for row in cursor.fetchall()]


def _wait(predicate, what: str, proc, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert proc.poll() is None, f"the worker exited with {proc.returncode}"
        assert time.monotonic() < deadline, what
        time.sleep(0.1)
    return value


def test_a_pruned_worker_registers_again_and_takes_runs(executor, settings, operator):
    if connection.vendor != "postgresql":
        pytest.skip("procrastinate needs PostgreSQL: this runs in make test's PostgreSQL pass")
    settings.PLANWATCH = {**settings.PLANWATCH, "EXECUTOR": "procrastinate",
                          "STALE_AFTER_SECONDS": 1.5}  # as the worker's (processes.py)
    with connection.cursor() as cursor:  # rows other tests' workers left: not this one's
        cursor.execute("DELETE FROM procrastinate_workers")
    # a transaction it is stopped in is ended within a second (its pools' setting)
    worker = spawn(["planwatch_worker"], "worker-pruned", PLANWATCH_EXECUTOR="procrastinate",
                   PLANWATCH_IDLE_TRANSACTION_SECONDS="1")
    try:
        (first_id,) = _wait(_worker_ids, "the worker did not register", worker)
        os.killpg(worker.pid, signal.SIGSTOP)  # its heartbeat (0.3 s) lapses
        time.sleep(2.0)  # past the stale window (1.5 s)
        seen = health.check_executor().detail  # what /readyz says of it
        assert (seen["workers_alive"], seen["workers_stalled"]) == (0, 1)
        assert "no worker's heartbeat is recent" in seen["warning"]
        assert _prune(1.5) == [first_id]
        os.killpg(worker.pid, signal.SIGCONT)
        again = _wait(_worker_ids, "the worker did not register again", worker)
        assert again != [first_id]
        run = services.run_create(graph="test.echo", input={"steps": 3}, user=operator)
        assert wait_run(run.id, statuses=("succeeded", "failed"), timeout=30).status == \
            "succeeded"
        assert worker.poll() is None
        assert health.check_executor().detail["workers_alive"] == 1
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGCONT)
            kill(worker)
