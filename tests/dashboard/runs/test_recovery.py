"""Runs survive the death of the process executing them (real subprocesses, SIGKILL)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from django.db import connection

from dashboard import services
from dashboard.models import Run, RunEvent
from tests.conftest import assert_gapless, database_url, wait_run
from tests.support.processes import kill, spawn

Kind = RunEvent.Kind
SLOW = {"steps": 150, "delay": 0.02}

pytestmark = [pytest.mark.long, pytest.mark.slow,
              pytest.mark.pg, pytest.mark.reliability, pytest.mark.server]


def wait_for_steps(run_id, count: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    """Wait until ``count`` nodes finished in the run (the subprocess must stay alive)."""
    deadline = time.monotonic() + timeout
    while RunEvent.objects.filter(run_id=run_id, kind=Kind.NODE_FINISHED).count() < count:
        assert proc.poll() is None, f"executor exited early with {proc.returncode}"
        assert time.monotonic() < deadline, "the run did not progress"
        time.sleep(0.05)


def assert_recovered(run: Run) -> None:
    assert run.status == Run.Status.SUCCEEDED, run.error_message
    assert run.output == {"n": SLOW["steps"], "answer": None}
    events = assert_gapless(run)
    assert [e.kind for e in events].count(Kind.RUN_RECOVERED) >= 1
    assert [e.kind for e in events].count(Kind.RUN_SUCCEEDED) == 1
    checkpoint_ids = [e.checkpoint_id for e in events if e.kind == Kind.CHECKPOINT]
    assert len(checkpoint_ids) == len(set(checkpoint_ids)), "a checkpoint was logged twice"


def test_sigkilled_executor_run_is_recovered_from_its_last_checkpoint(executor, settings):
    proc = spawn(["start_run", "test.echo", "--input", json.dumps(SLOW)], "start-run-killed")
    try:
        deadline = time.monotonic() + 60
        while not Run.objects.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        run_id = Run.objects.get().id
        wait_for_steps(run_id, 10, proc)
    finally:
        kill(proc)
    run = Run.objects.get(id=run_id)
    assert run.status == Run.Status.RUNNING and run.owner  # left behind by the dead process

    settings.PLANWATCH = {**settings.PLANWATCH, "STALE_AFTER_SECONDS": 1.5}
    assert services.run_recover_stale() == []  # heartbeat still fresh: not ours to take yet
    time.sleep(1.6)
    assert services.run_recover_stale() == [run_id]
    assert_recovered(wait_run(run_id, statuses=("succeeded", "failed", "cancelled"),
                              timeout=120))


@pytest.mark.postgres
def test_procrastinate_worker_executes_runs_and_a_second_worker_recovers_a_killed_one(
    executor, settings, operator
):
    if connection.vendor != "postgresql":
        pytest.skip("procrastinate needs PostgreSQL: this runs in make test's PostgreSQL pass")
    settings.PLANWATCH = {**settings.PLANWATCH, "EXECUTOR": "procrastinate"}
    env = {"PLANWATCH_EXECUTOR": "procrastinate"}
    first = spawn(["planwatch_worker"], "worker-1", **env)
    second = None
    try:
        quick = services.run_create(graph="test.echo", input={"steps": 3}, user=operator)
        assert wait_run(quick.id, statuses=("succeeded", "failed")).status == "succeeded"
        assert quick.events.filter(kind=Kind.RUN_STARTED).get().payload["owner"] != \
            executor.owner  # the worker executed it, not this process

        slow = services.run_create(graph="test.echo", input=SLOW, user=operator)
        wait_for_steps(slow.id, 10, first)
        kill(first)
        second = spawn(["planwatch_worker"], "worker-2", **env)
        run = wait_run(slow.id, statuses=("succeeded", "failed", "cancelled"), timeout=120)
        assert_recovered(run)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                kill(proc)


@pytest.mark.postgres
def test_with_the_default_windows_a_killed_workers_run_resumes_within_seconds(
        executor, settings, operator):
    """Measured, not asserted against a clock: the delay is printed for docs/reliability.md.

    The default heartbeat (2 s) and stale window (6 s), procrastinate's sweep every 2 s.
    """
    if connection.vendor != "postgresql":
        pytest.skip("procrastinate needs PostgreSQL: this runs in make test's PostgreSQL pass")
    settings.PLANWATCH = {**settings.PLANWATCH, "EXECUTOR": "procrastinate"}
    defaults = {"PLANWATCH_EXECUTOR": "procrastinate", "PLANWATCH_HEARTBEAT_SECONDS": "2",
                "PLANWATCH_STALE_AFTER_SECONDS": "6"}
    first = spawn(["planwatch_worker"], "worker-default-1", **defaults)
    second = spawn(["planwatch_worker"], "worker-default-2", **defaults)
    try:
        slow = services.run_create(graph="test.echo", input={"steps": 400, "delay": 0.02},
                                   user=operator)
        wait_for_steps(slow.id, 10, first if Run.objects.get(id=slow.id).owner else second)
        owner = Run.objects.get(id=slow.id).owner
        victim, survivor = (first, second) if str(first.pid) in owner else (second, first)
        killed_at = time.time()
        kill(victim)
        run = wait_run(slow.id, statuses=("succeeded", "failed", "cancelled"), timeout=120)
        recovered = run.events.get(kind=Kind.RUN_RECOVERED)
        delay = recovered.created_at.timestamp() - killed_at
        print(f"\nrecovery after SIGKILL: {delay:.1f} s (heartbeat 2 s, stale window 6 s)")
        assert run.status == Run.Status.SUCCEEDED and survivor.poll() is None
        assert recovered.payload["owner"] != owner
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                kill(proc)


def test_a_live_executor_busy_in_a_long_node_keeps_its_run(executor, settings, operator):
    settings.PLANWATCH = {**settings.PLANWATCH, "HEARTBEAT_SECONDS": 0.3,
                          "STALE_AFTER_SECONDS": 1.0}
    from dashboard.runs.dispatch import reset_executor

    reset_executor()  # take the short heartbeat
    run = services.run_create(graph="test.echo", input={"steps": 1, "delay": 3.0},
                              user=operator)
    deadline = time.monotonic() + 30
    while not RunEvent.objects.filter(run_id=run.id, kind=Kind.NODE_STARTED).exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    owner = Run.objects.get(id=run.id).owner
    for _ in range(4):  # 2 s inside one 3 s node, twice the stale window
        time.sleep(0.5)
        assert services.run_recover_stale() == []
    run = wait_run(run.id, statuses=("succeeded", "failed", "cancelled"))
    assert run.status == Run.Status.SUCCEEDED
    assert not run.events.filter(kind=Kind.RUN_RECOVERED).exists()
    assert run.events.get(kind=Kind.RUN_STARTED).payload["owner"] == owner


def _terminate_other_backends() -> int:
    """pg_terminate_backend on every other connection to the test database."""
    import psycopg

    with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as killer:
        row = killer.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()
    return row[0] if row else 0


@pytest.mark.postgres
def test_a_procrastinate_worker_outlives_its_database_connections_being_killed(
        executor, settings, operator):
    if connection.vendor != "postgresql":
        pytest.skip("procrastinate needs PostgreSQL: this runs in make test's PostgreSQL pass")
    settings.PLANWATCH = {**settings.PLANWATCH, "EXECUTOR": "procrastinate"}
    worker = spawn(["planwatch_worker"], "worker-backend-kills",
                   PLANWATCH_EXECUTOR="procrastinate")
    try:
        first = services.run_create(graph="test.echo", input={"steps": 3}, user=operator)
        assert wait_run(first.id, statuses=("succeeded", "failed")).status == "succeeded"
        slow = services.run_create(graph="test.echo", input={"steps": 60, "delay": 0.05},
                                   user=operator)
        killed = 0
        for _ in range(6):  # a storm: every backend killed, six times in 3 s
            killed += _terminate_other_backends()
            time.sleep(0.5)
        connection.close()  # the test's own went too
        assert killed >= 6
        time.sleep(2)  # heartbeat 0.3 s: procrastinate would have stopped the worker by now
        assert worker.poll() is None, "the worker exited after its connections were killed"
        after = services.run_create(graph="test.echo", input={"steps": 3}, user=operator)
        assert wait_run(after.id, statuses=("succeeded", "failed")).status == "succeeded"
        run = wait_run(slow.id, statuses=("succeeded", "failed", "cancelled"), timeout=60)
        # the run in flight during the storm ends, its log gapless; it may fail naming the
        # killed connection (CI once: AdminShutdown from a write the worker does not retry)
        assert run.status == Run.Status.SUCCEEDED or "AdminShutdown" in run.error_message or \
            "connection" in run.error_message, run.error_message
        assert_gapless(run)
        assert worker.poll() is None
    finally:
        if worker.poll() is None:
            kill(worker)
