"""Faults under a streaming client: daphne killed and restarted, Redis restarted, the
database's connections killed. Real processes, real servers; what a client sees is
compared with the run's event log, which must stay gapless.

The client is LangGraph's SSE stream (``/langgraph/…/runs/<id>/stream``), resumed with
``Last-Event-ID`` as the official clients do; the event ids are the log's seqs, the same
cursor the trace page's websocket resumes from (``?after=``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import requests
from django.db import connection

from dashboard.models import Run, RunEvent
from tests.conftest import (
    api_token,
    free_port,
    need,
    port_open,
    wait_run,
)
from tests.support.lgserver import expected_ids
from tests.support.processes import Daphne, daphne

pytestmark = [pytest.mark.long, pytest.mark.slow,
              pytest.mark.pg, pytest.mark.reliability, pytest.mark.server,
              pytest.mark.django_db(transaction=True)]

Kind = RunEvent.Kind
LONG = {"steps": 120, "delay": 0.03}
@contextmanager
def private_redis(port: int) -> Iterator[subprocess.Popen]:
    """A redis-server of the test's own on ``port`` (nothing kept on disk)."""
    binary = shutil.which("redis-server")
    need("redis-server", bool(binary), "apt-get install redis-server")
    assert binary is not None
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not port_open("127.0.0.1", port):
        assert time.monotonic() < deadline, "redis-server did not start"
        time.sleep(0.05)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def start_run(server: Daphne, key: str) -> tuple[str, str]:
    """A long echo run on a new thread, through the API; (thread id, run id)."""
    headers = {"x-api-key": key}
    thread = requests.post(f"{server.url}/langgraph/threads", json={}, headers=headers,
                           timeout=10).json()["thread_id"]
    run = requests.post(f"{server.url}/langgraph/threads/{thread}/runs", headers=headers,
                        json={"assistant_id": "test.echo", "input": LONG}, timeout=10)
    assert run.status_code == 200, run.text
    return thread, run.json()["run_id"]


def read_ids(server: Daphne, key: str, thread: str, run: str, *, after: str,
             received: list[int], stop_after: int | None = None) -> bool:
    """Read the run's stream from ``after``, appending each event id; True if it ended."""
    url = f"{server.url}/langgraph/threads/{thread}/runs/{run}/stream"
    try:
        with requests.get(url, params={"stream_mode": "tasks"}, stream=True, timeout=30,
                          headers={"x-api-key": key, "Last-Event-ID": after}) as response:
            response.raise_for_status()
            for line in response.iter_lines(decode_unicode=True):
                if line.startswith("id: "):
                    received.append(int(line[4:]))
                    if stop_after is not None and len(received) >= stop_after:
                        return False
    except requests.exceptions.ChunkedEncodingError:
        return False  # the server died under the stream
    except requests.exceptions.ConnectionError:
        return False
    return True


def stream_from_start(server: Daphne, key: str, events: int
                      ) -> tuple[str, str, list[int]]:
    """Start a long run and read its first ``events`` stream events; (thread, run, ids)."""
    thread, run_id = start_run(server, key)
    received: list[int] = []
    assert not read_ids(server, key, thread, run_id, after="0", received=received,
                        stop_after=events)
    return thread, run_id, received


def resume_to_end(server: Daphne, key: str, thread: str, run_id: str,
                  received: list[int]) -> None:
    """As the SDK does: reconnect from the last id received until the stream ends."""
    deadline = time.monotonic() + 60
    while not read_ids(server, key, thread, run_id, after=str(received[-1]),
                       received=received):
        assert time.monotonic() < deadline, "the stream never ended"


def test_daphne_killed_under_a_stream_the_run_recovers_and_the_client_resumes_exactly(
        operator):
    key = api_token(operator)
    with daphne() as server:
        thread, run_id, received = stream_from_start(server, key, 20)
        server.kill()  # SIGKILL: the run's executor dies with it
        killed_at = time.monotonic()
        server.start()  # same port; its reaper recovers the stale run
        resume_to_end(server, key, thread, run_id, received)
        run = wait_run(run_id, statuses=("succeeded",), timeout=30)
        recovered_after = (run.finished_at.timestamp() - time.time()) + (
            time.monotonic() - killed_at)
    assert received == expected_ids(run_id)  # every event once, in order, none lost
    kinds = list(run.events.values_list("kind", flat=True))
    assert Kind.RUN_RECOVERED in kinds
    assert run.output == {"n": LONG["steps"], "answer": None}
    print(f"daphne SIGKILL → run finished {recovered_after:.1f} s later, "
          f"{len(received)} events streamed exactly once")


@pytest.mark.redis
def test_redis_restarted_under_a_stream_the_client_sees_every_event_once(operator):
    key = api_token(operator)
    port = free_port()
    with private_redis(port) as redis, daphne(REDIS_URL=f"redis://127.0.0.1:{port}/0") as server:
        thread, run_id, received = stream_from_start(server, key, 10)
        redis.kill()
        redis.wait(10)
        time.sleep(1)  # the run goes on; its doorbells fail meanwhile
        with private_redis(port):
            ended = read_ids(server, key, thread, run_id, after=str(received[-1]),
                             received=received)
            assert ended
            run = wait_run(run_id, statuses=("succeeded",), timeout=30)
    assert received == expected_ids(run_id)
    assert run.output == {"n": LONG["steps"], "answer": None}


@pytest.mark.postgres
def test_database_connections_killed_mid_run_lose_nothing(operator):
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend is PostgreSQL's; this runs in the PostgreSQL pass")
    key = api_token(operator)
    with daphne() as server:
        thread, run_id, received = stream_from_start(server, key, 20)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            killed = cursor.fetchone()[0]
        assert killed >= 1
        resume_to_end(server, key, thread, run_id, received)
        run = wait_run(run_id, statuses=("succeeded", "failed"), timeout=60)
    assert received == expected_ids(run_id)
    assert run.status == Run.Status.SUCCEEDED, run.error_message
    checkpoints = list(run.events.filter(kind=Kind.CHECKPOINT)
                       .values_list("checkpoint_id", flat=True))
    assert len(checkpoints) == len(set(checkpoints)), "a checkpoint was logged twice"
    print(f"{killed} connections terminated mid-run: {json.dumps(run.status)}")


def _terminate_every_connection() -> None:
    """pg_terminate_backend on every connection to the test database but one of its own,
    and wait until they are gone (the pool's check could then see it, so the test turns
    that check off: the case is a checkout that wins the race with the server's goodbye)."""
    import psycopg

    from tests.conftest import database_url as url_of

    with psycopg.connect(url_of(connection.settings_dict), autocommit=True) as killer:
        pids = [pid for (pid,) in killer.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()").fetchall()]
        assert pids, "no connection to terminate"
        killer.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid",
                       [pids])
        for _ in range(200):
            left = killer.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)",
                                  [pids]).fetchone()
            if left is not None and left[0] == 0:
                return
            time.sleep(0.01)
    raise AssertionError("terminated backends did not exit")


def test_a_request_drawing_a_dropped_connection_is_answered_again_or_refused_with_503(
        operator, client, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend is PostgreSQL's; this runs in the PostgreSQL pass")
    from config import pgpool

    monkeypatch.setattr(pgpool, "needs_check", lambda conn: False)  # lose the race
    client.raise_request_exception = False  # the statuses say what the client would see
    client.force_login(operator)
    assert client.get("/").status_code == 200

    _terminate_every_connection()
    page = client.get("/")
    assert page.status_code == 200, page.content[:300]

    key = api_token(operator)
    _terminate_every_connection()
    listed = client.get("/api/runs/", headers={"Authorization": f"Token {key}"})
    assert listed.status_code == 200, listed.content[:300]

    _terminate_every_connection()
    created = client.post("/langgraph/threads", {}, content_type="application/json",
                          headers={"x-api-key": key})
    assert created.status_code == 503, created.content[:300]
    assert created.headers["Retry-After"]
    assert "connection was lost" in created.json()["detail"]
    again = client.post("/langgraph/threads", {}, content_type="application/json",
                        headers={"x-api-key": key})
    assert again.status_code == 200, again.content[:300]
    _terminate_every_connection()
    connection.close()  # the test's own was dropped too: the flush after it draws a new one
