"""Writers of several runs at once lock their rows in one order (the runs' ids), so they
never deadlock: an executor's heartbeat (every run it holds, one statement) and its batched
event write (the events, progress and fence of every run with rows, one statement), on two
connections at once. A 300-stream round met PostgreSQL's deadlock detector five times
between the two (the write fell back to run by run, and two runs stayed ``running``)."""

from __future__ import annotations

import random
import threading
import uuid

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from dashboard.models import Run, Thread
from dashboard.runs import store
from tests.conftest import database_url

pytestmark = [pytest.mark.pg, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

RUNS = 24
ROUNDS = 150


def _statement(sql: store.Statements, statements: list[store.Statement]) -> store.Statement:
    """``statements`` as the run store sends them on PostgreSQL: CTEs of the last one."""
    head = [f"w{i} AS ({text})" for i, (text, _) in enumerate(statements[:-1])]
    text = (f"WITH {', '.join(head)} " if head else "") + statements[-1][0]
    return text, [p for _, params in statements for p in params]


def test_a_heartbeat_and_a_batched_event_write_of_the_same_runs_never_deadlock():
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's; this runs in the PostgreSQL pass")
    thread = Thread.objects.create(status="busy")
    runs = [Run.objects.create(graph="test.echo", thread_id=f"order-{uuid.uuid4()}",
                               input={}, state="running", owner="exec-a", epoch=1,
                               heartbeat_at=timezone.now(), started_at=timezone.now(),
                               conversation=thread if i == 0 else None)
            for i in range(RUNS)]
    sql = store.Statements(postgres=True)
    url = database_url(connection.settings_dict)
    failures: list[BaseException] = []

    def beat(shuffled: random.Random) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            for _ in range(ROUNDS):
                ids = [run.id for run in runs]
                shuffled.shuffle(ids)
                text, params = sql.heartbeat(ids, "exec-a", store.heartbeat(now=timezone.now()))
                conn.execute(text, params)

    def write(shuffled: random.Random) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            for _ in range(ROUNDS):
                batch = list(runs)
                shuffled.shuffle(batch)
                now = timezone.now()
                moves = [store.progress_move(run, store.progress(now=now, current_node="n"))
                         for run in batch]
                conn.execute(*_statement(sql, [sql.progress(moves, now), sql.fence(batch)]))

    def guarded(work, seed: int) -> None:
        try:
            work(random.Random(seed))
        except BaseException as exc:  # reported by the test
            failures.append(exc)

    workers = [threading.Thread(target=guarded, args=(work, seed))
               for seed, work in enumerate((beat, write, beat, write))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert failures == []
