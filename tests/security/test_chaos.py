"""A storm of PostgreSQL backend kills under ten runs streamed through the official
``langgraph-sdk``: every run finishes, every log is gapless, no stream hangs, and the
cron scheduler fires again afterwards."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from django.db import connection

from dashboard.models import Cron, Run
from tests.conftest import api_token, assert_gapless, database_url
from tests.support.processes import daphne

pytestmark = [pytest.mark.long, pytest.mark.slow,
              pytest.mark.postgres, pytest.mark.pg, pytest.mark.reliability,
              pytest.mark.django_db(transaction=True)]

RUNS = 10
KILLS = 8  # one a second
STREAM_TIMEOUT = 90  # a stream that has not ended by then hung


def kill_app_backends(url: str) -> int:
    """pg_terminate_backend on every other connection to the test database."""
    with psycopg.connect(url, autocommit=True) as killer:
        row = killer.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()
    return row[0] if row else 0


def test_ten_sdk_runs_outlive_eight_backend_kills_in_eight_seconds(operator):
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend is PostgreSQL's; this runs in the PostgreSQL pass")
    from langgraph_sdk import get_sync_client

    key = api_token(operator)
    url = database_url(connection.settings_dict)
    with daphne(PLANWATCH_CRON_POLL_SECONDS="0.5") as server:
        sdk = get_sync_client(url=f"{server.url}/langgraph", api_key=key)
        cron = sdk.crons.create("test.echo", schedule="* * * * * *", input={"steps": 1})

        started = threading.Semaphore(0)

        def one_run() -> tuple[str, list[str]]:
            thread = sdk.threads.create()["thread_id"]
            seen: list[str] = []
            for part in sdk.runs.stream(thread, "test.echo", input={"steps": 50, "delay": 0.2},
                                        stream_mode="updates"):
                if not seen:
                    started.release()  # the storm starts once every run streams
                seen.append(part.event)
            return thread, seen

        with ThreadPoolExecutor(RUNS) as pool:
            streams = [pool.submit(one_run) for _ in range(RUNS)]
            for _ in range(RUNS):
                assert started.acquire(timeout=60), "a run never started streaming"
            killed = 0
            for _ in range(KILLS):
                killed += kill_app_backends(url)
                time.sleep(1)
            storm_over = time.time()
            ended = [s.result(timeout=STREAM_TIMEOUT) for s in streams]  # none hangs
        connection.close()  # the test's own went too

        threads = [thread for thread, _ in ended]
        deadline = time.monotonic() + 60
        while Run.objects.filter(conversation__in=threads).exclude(
                status__in=("succeeded", "failed", "cancelled")).exists():
            assert time.monotonic() < deadline, "runs never finished"
            time.sleep(0.2)
        runs = list(Run.objects.filter(conversation__in=threads))
        assert len(runs) == RUNS
        assert [r.status for r in runs] == ["succeeded"] * RUNS, [r.error_message for r in runs]
        for run in runs:
            assert_gapless(run)
        # the scheduler fired the every-second cron after the storm
        deadline = time.monotonic() + 20
        while not Run.objects.filter(metadata__cron_id=cron["cron_id"],
                                     created_at__gt=_aware(storm_over)).exists():
            assert time.monotonic() < deadline, "the cron never fired after the storm"
            time.sleep(0.2)
        assert Cron.objects.get(id=cron["cron_id"]).broken_at is None
        Cron.objects.filter(id=cron["cron_id"]).delete()
    print(f"\n{killed} backends killed in {KILLS} kills; {RUNS}/{RUNS} runs succeeded; "
          f"stream endings: {sorted({events[-1] for _, events in ended})}")


def _aware(stamp: float):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(stamp, UTC)
