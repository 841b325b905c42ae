"""Two resumes of one waiting thread, each with its ``Command(update=…)``, racing.

A connection of the test's own holds the thread's row (as a request deciding holds it,
``thread_runs.locked``) until both requests wait on it, so both reach the decision before
either is decided, whatever the machine's speed. Exactly one is applied; the checkpoint
then holds its update only: a request that loses writes nothing.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest
from django.db import connection

from dashboard.models import Run
from dashboard.runs.savers import postgres_conninfo
from tests.conftest import api_token, wait_run

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True), pytest.mark.server]

# each resume's update (the second's names two channels, so some of it would survive a
# clash with the first's), and the state the graph ends in if that resume is the one applied
RESUMES = {
    "first": ({"item": "first desk"}, {"item": "first desk", "quantity": 1,
                                       "approved": "first"}),
    "second": ({"item": "second desk", "quantity": 7}, {"item": "second desk", "quantity": 7,
                                                        "approved": "second"}),
}


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


def test_of_two_racing_resumes_with_updates_only_the_winners_update_is_applied(
        lg_url, sdk_user):
    headers = {"x-api-key": api_token(sdk_user)}
    tid = httpx.post(f"{lg_url}/threads", json={}, headers=headers).json()["thread_id"]
    httpx.post(f"{lg_url}/threads/{tid}/runs/wait", headers=headers, timeout=60,
               json={"assistant_id": "orders", "input": {"item": "lamp"}})
    [run] = Run.objects.filter(conversation_id=tid)
    assert run.status == Run.Status.INTERRUPTED

    def resume(name: str) -> httpx.Response:
        return httpx.post(f"{lg_url}/threads/{tid}/runs", headers=headers, timeout=60, json={
            "assistant_id": "orders",
            "command": {"resume": name, "update": RESUMES[name][0]}})

    conninfo = postgres_conninfo(connection.settings_dict)
    with psycopg.connect(conninfo) as holder, \
            psycopg.connect(conninfo, autocommit=True) as watcher, \
            ThreadPoolExecutor(2) as pool:
        holder.execute("SELECT 1 FROM dashboard_thread WHERE id = %s FOR UPDATE", [tid])
        first = pool.submit(resume, "first")
        wait_for_waiters(watcher, 1)
        second = pool.submit(resume, "second")
        wait_for_waiters(watcher, 2)
        holder.rollback()  # both are at the decision: let them through
        answers = {"first": first.result(), "second": second.result()}

    applied = [n for n, r in answers.items() if r.status_code == 200]
    assert len(applied) == 1, {n: r.text for n, r in answers.items()}
    [winner], [loser] = applied, set(answers) - set(applied)
    wait_run(run.id, statuses=("succeeded",))
    state = httpx.get(f"{lg_url}/threads/{tid}/state", headers=headers).json()
    assert state["values"] == RESUMES[winner][1]  # the winner's update, none of the loser's
    run.refresh_from_db()
    assert [(i.answer, i.status) for i in run.interrupts.all()] == [(winner, "answered")]
    # the loser is told the thread no longer waits, as a resume of any such thread is
    assert answers[loser].status_code == 409, answers[loser].text
    assert "answered already, not waiting for an answer" in answers[loser].json()["detail"]
