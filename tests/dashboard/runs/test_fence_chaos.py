"""The fence under chaos: a worker stalled (SIGSTOP) past the stale window while it runs a
run, the other worker takes the run over, then the stalled one wakes (SIGCONT). Its writes
are refused: the thread's checkpoints are those the run's log names, and its execution
ends itself, saying so once."""

from __future__ import annotations

import os
import signal
import time

import pytest
from django.db import connection

from dashboard import services
from dashboard.models import Run, RunEvent
from tests.conftest import ARTIFACTS, assert_gapless, wait_run
from tests.support.processes import kill, spawn

Kind = RunEvent.Kind

# long: 25 s alone, 64 s in a loaded PostgreSQL pass, where the takeover it waits for came
# too late once (make test-all runs it; the fence's unit tests, test_fence.py, run in both
# passes and the fast layer)
pytestmark = [pytest.mark.pg, pytest.mark.postgres, pytest.mark.reliability,
              pytest.mark.server, pytest.mark.long]

LOST = "another executor took it over"
"""What the stalled executor logs, once, when its execution ends."""


def _wait(what: str, test, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _finished(run_id) -> int:
    return RunEvent.objects.filter(run_id=run_id, kind=Kind.NODE_FINISHED).count()


def _root_checkpoints(thread_id: str) -> dict[str, str | None]:
    """The thread's root checkpoints, each with its parent, as the saver stored them."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints "
                       "WHERE thread_id = %s AND checkpoint_ns = ''", [thread_id])
        return dict(cursor.fetchall())


def test_a_stalled_worker_that_lost_its_run_writes_nothing_and_stops(executor, settings,
                                                                      operator):
    if connection.vendor != "postgresql":
        pytest.skip("procrastinate needs PostgreSQL: this runs in make test's PostgreSQL pass")
    settings.PLANWATCH = {**settings.PLANWATCH, "EXECUTOR": "procrastinate"}
    env = {"PLANWATCH_EXECUTOR": "procrastinate"}
    workers = [spawn(["planwatch_worker"], f"worker-fence-{i}", **env) for i in (1, 2)]
    try:
        run = services.run_create(graph="test.echo", input={"steps": 250, "delay": 0.04},
                                  user=operator)
        _wait("the run did not start", lambda: _finished(run.id) >= 10)
        owner = Run.objects.get(id=run.id).owner
        stalled, other = workers if f":{workers[0].pid}:" in owner else workers[::-1]
        assert f":{stalled.pid}:" in owner, owner
        os.killpg(stalled.pid, signal.SIGSTOP)
        _wait("no worker took the stalled one's run over",
              lambda: Run.objects.get(id=run.id).owner not in ("", owner), timeout=60)
        taken = _finished(run.id)
        _wait("the new owner did not go on", lambda: _finished(run.id) >= taken + 10)
        os.killpg(stalled.pid, signal.SIGCONT)

        run = wait_run(run.id, statuses=("succeeded", "failed", "cancelled"), timeout=120)
        log = ARTIFACTS / f"worker-fence-{workers.index(stalled) + 1}.log"
        deadline = time.monotonic() + 30
        while LOST not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # anything it would still write lands now

        assert run.status == Run.Status.SUCCEEDED, run.error_message
        assert run.output == {"n": 250, "answer": None}
        events = assert_gapless(Run.objects.get(id=run.id))
        logged = [e.checkpoint_id for e in events
                  if e.kind == Kind.CHECKPOINT and e.namespace == ""]
        assert len(logged) == len(set(logged)), "a checkpoint was logged twice"
        stored = _root_checkpoints(run.thread_id)
        # the thread holds what the log says, and nothing of the stalled worker's branch
        assert set(stored) == set(logged), (
            f"{len(set(stored) - set(logged))} checkpoints in the thread that the log does "
            f"not name; {len(set(logged) - set(stored))} logged that the thread lacks")
        assert max(stored) == logged[-1]  # its state is the log's last checkpoint
        # its history is one chain, from the log's last checkpoint back to its first
        chain, at = [], logged[-1]
        while at is not None:
            chain.append(at)
            at = stored[at]
        assert sorted(chain) == sorted(stored)
        # the stalled execution ended itself, saying so once, and both workers live on
        assert log.read_text().count(LOST) == 1, "the stalled execution did not stop once"
        assert stalled.poll() is None and other.poll() is None
    finally:
        for proc in workers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGCONT)
                kill(proc)
