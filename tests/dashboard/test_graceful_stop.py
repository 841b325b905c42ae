"""A rolling restart of every web process (``serve --processes 2``, SIGHUP) under 20 runs
streamed by LangGraph's official client: no event lost or repeated, every run finished.

Each process drains on SIGTERM: it stops listening, cuts its SSE streams (the client
reconnects to the stream's ``Location`` with ``Last-Event-ID``, on the other process),
and hands its runs over at a node boundary (the other process takes them at once).
About 40 s: two processes started, then one more for each restarted (the machine's
time to start a process decides it); the runs are held in flight until both restarted.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from dashboard.models import Run, RunEvent
from dashboard.web.serving import readyz_url, wait_ready
from tests.conftest import (
    ARTIFACTS,
    ROOT,
    SMALL_POOLS,
    api_token,
    assert_gapless,
    database_url,
    free_port,
    wait_run,
)
from tests.support.lgserver import async_sdk_client, expected_ids

pytestmark = [pytest.mark.long, pytest.mark.pg, pytest.mark.postgres, pytest.mark.reliability,
              pytest.mark.server, pytest.mark.django_db(transaction=True)]

Kind = RunEvent.Kind
RUNS = 20
STEPS = 150
HOLD = ARTIFACTS / "rolling-hold"
"""While this file exists each step takes 0.5 s: the runs are in flight through both
restarts (however long starting a process takes), then end in seconds."""


def serve(port: int) -> subprocess.Popen:
    """``manage.py serve --processes 2`` on the test database, knowing the test graphs."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **SMALL_POOLS, "DATABASE_URL": database_url(connection.settings_dict),
           "PLANWATCH_GRAPH_MODULES": "tests.graphs", "PLANWATCH_THINK_TIME": "0",
           # (the default windows: a process starting beside 20 runs on a busy machine may
           # not beat for a second or two; a handed-over run needs no stale window)
           "PLANWATCH_DRAIN_SECONDS": "2", "PYTHONUNBUFFERED": "1"}
    log = (ARTIFACTS / f"rolling-{port}.log").open("w")
    return subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--processes", "2"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)


def rolled(log: Path) -> bool:
    """Whether the supervisor said its rolling restart is done."""
    return "rolling restart done" in log.read_text()


async def stream_through_a_restart(url: str, key: str, supervisor: subprocess.Popen,
                                   log: Path) -> list[tuple[str, list[int]]]:
    """Stream ``RUNS`` runs; once each has sent an event, SIGHUP the supervisor; each
    run's id with the event ids its stream received."""
    sdk = async_sdk_client(f"{url}/langgraph", key)
    started: list[asyncio.Future[None]] = [asyncio.get_running_loop().create_future()
                                           for _ in range(RUNS)]

    async def one(index: int) -> tuple[str, list[int]]:
        thread = await sdk.threads.create()
        run_id, ids = "", []
        async for part in sdk.runs.stream(thread["thread_id"], "test.echo", input={
            "steps": STEPS, "delay": 0.5, "held_by": str(HOLD)},
                                          stream_mode="tasks"):
            if part.event == "metadata":
                run_id = run_id or part.data["run_id"]
            if part.id:
                ids.append(int(part.id))
                if not started[index].done():
                    started[index].set_result(None)
        return run_id, ids

    try:
        streams = [asyncio.ensure_future(one(i)) for i in range(RUNS)]
        await asyncio.wait_for(asyncio.gather(*started), 60)
        supervisor.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 240  # a guard: a busy machine starts processes slowly
        while not rolled(log):
            assert time.monotonic() < deadline, f"no rolling restart: see {log}"
            assert not all(s.done() for s in streams), "the runs ended before the restart did"
            await asyncio.sleep(0.2)
        HOLD.unlink()
        return await asyncio.wait_for(asyncio.gather(*streams), 240)
    finally:
        await sdk.http.client.aclose()


def differences(ids: list[int], expected: list[int]) -> str:
    """What a stream received other than the log's ids, once each in order."""
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    return (f"lost {sorted(set(expected) - set(ids))}, repeated {repeated}, not the log's "
            f"{sorted(set(ids) - set(expected))}, {len(ids)} ids of {len(expected)}")


def test_a_rolling_restart_under_20_streams_loses_no_event_and_no_run(operator):
    if connection.vendor != "postgresql":
        pytest.skip("serve --processes 2 needs PostgreSQL: this runs in the PostgreSQL pass")
    port = free_port()
    HOLD.parent.mkdir(parents=True, exist_ok=True)
    HOLD.touch()
    supervisor = serve(port)
    try:
        assert wait_ready(readyz_url("127.0.0.1", port), timeout=180), "serve did not start"
        url = f"http://127.0.0.1:{port}"
        results = asyncio.run(stream_through_a_restart(
            url, api_token(operator), supervisor, ARTIFACTS / f"rolling-{port}.log"))
    finally:
        HOLD.unlink(missing_ok=True)
        supervisor.terminate()
        supervisor.wait(60)
    handed_over = 0
    for run_id, ids in results:
        run = wait_run(run_id, statuses=("succeeded", "failed", "cancelled"), timeout=30)
        assert run.status == Run.Status.SUCCEEDED, run.error_message
        assert run.output == {"n": STEPS, "answer": None}
        expected = expected_ids(run_id)
        assert ids == expected, f"run {run_id}: {differences(ids, expected)}"
        events = assert_gapless(run)
        handed_over += [e.kind for e in events].count(Kind.RUN_RECOVERED)
    assert handed_over >= RUNS // 2, "the restart took over fewer runs than were in flight"
    print(f"\nrolling restart of 2 processes under {RUNS} streams: {handed_over} handovers, "
          "every event once, every run succeeded")
