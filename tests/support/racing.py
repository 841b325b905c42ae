"""Two requests on one thread raced at its lock (``thread_runs.locked``): a connection of
the test's own holds the thread's row, as a deciding request holds it, until both wait on
it, the first before the second, so both reach the decision before either is decided,
whatever the machine's speed, and PostgreSQL lets them through in that order."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
from django.db import connection

from dashboard.models import Run
from dashboard.runs.savers import postgres_conninfo


def waiting_on_locks(watcher: psycopg.Connection) -> int:
    """How many sessions of the test database wait on a lock. ``watcher`` is in autocommit:
    inside a transaction PostgreSQL shows pg_stat_activity as it was at the transaction's
    first look (the holder's own saw one waiter for ever, and the test failed after 60 s
    in a CI pass)."""
    return watcher.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock'").fetchone()[0]


def wait_for_waiters(watcher: psycopg.Connection, count: int) -> None:
    """Wait until ``count`` sessions wait on a lock (a deadlock guard, not a speed test)."""
    deadline = time.monotonic() + 60
    while waiting_on_locks(watcher) < count:
        assert time.monotonic() < deadline, f"{count} requests never reached the thread lock"
        time.sleep(0.02)


def race(thread_id: str, first: Callable[[], httpx.Response],
         second: Callable[[], httpx.Response]) -> tuple[httpx.Response, httpx.Response]:
    """Send ``first``, then ``second`` once ``first`` waits on the thread's row, and let
    both through once both wait: their answers."""
    conninfo = postgres_conninfo(connection.settings_dict)
    # the pool is left last: were a wait to fail, the holder's connection closes first and
    # lets the requests through, where the pool's exit would otherwise wait on them for ever
    # (a CI pass hung here until its limit)
    with ThreadPoolExecutor(2) as pool, psycopg.connect(conninfo) as holder, \
            psycopg.connect(conninfo, autocommit=True) as watcher:
        holder.execute("SELECT 1 FROM dashboard_thread WHERE id = %s FOR UPDATE", [thread_id])
        one = pool.submit(first)
        wait_for_waiters(watcher, 1)
        two = pool.submit(second)
        wait_for_waiters(watcher, 2)
        holder.rollback()  # both are at the decision: let them through
        return one.result(), two.result()


def waiting_thread(lg_url: str, headers: dict[str, str]) -> tuple[str, Run]:
    """A thread of the orders graph waiting for its approval, and its run (the thread
    both racing requests go to)."""
    tid = httpx.post(f"{lg_url}/threads", json={}, headers=headers).json()["thread_id"]
    httpx.post(f"{lg_url}/threads/{tid}/runs/wait", headers=headers, timeout=60,
               json={"assistant_id": "orders", "input": {"item": "lamp"}})
    [run] = Run.objects.filter(conversation_id=tid)
    assert run.status == Run.Status.INTERRUPTED
    return tid, run
