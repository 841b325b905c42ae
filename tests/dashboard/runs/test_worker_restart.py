"""``planwatch_worker`` outlives its database: a worker that stops on a database error (the
server restarting, or away when it starts) is started again, with back-off."""

from __future__ import annotations

import asyncio

import psycopg
from procrastinate.exceptions import ConnectorException

from dashboard.runs import jobs


def test_a_worker_stopped_by_a_database_error_is_started_again(monkeypatch):
    faults = [ConnectorException("the server closed the connection"),
              psycopg.OperationalError("connection refused")]
    started = []

    async def once(*, concurrency: int) -> None:
        started.append(concurrency)
        if faults:
            raise faults.pop(0)

    monkeypatch.setattr(jobs, "arun_worker_once", once)
    monkeypatch.setattr(jobs, "BACKOFF_FIRST", 0.001)
    asyncio.run(jobs.arun_worker(concurrency=3))
    assert started == [3, 3, 3]  # two faults, then it ran until stopped
