"""A run start (``POST /threads`` then ``POST /threads/<id>/runs``) writes its rows and
reads back none of them, in as few statements as its decisions need; a new run is announced
to the runs list only (nobody knows its id yet to watch it)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from dashboard.models import LangGraphRun
from dashboard.runs import doorbells
from tests.conftest import api_token

pytestmark = [pytest.mark.pg, pytest.mark.both, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def client(django_user_model) -> Client:
    user = django_user_model.objects.create_user(username="starter", password="pw-start-1")
    user.user_permissions.set(Permission.objects.filter(codename__in=["start_run"]))
    return Client(headers={"x-api-key": api_token(user)})


@pytest.fixture
def told(monkeypatch) -> list[str]:
    """The groups doorbells were sent to."""
    groups: list[str] = []

    async def asend(group: str, message: dict) -> None:
        groups.append(group)

    monkeypatch.setattr(doorbells, "asend", asend)
    return groups


def test_a_start_reads_back_none_of_the_rows_it_wrote(client, told):
    thread = client.post("/langgraph/threads", "{}", content_type="application/json").json()
    with CaptureQueriesContext(connection) as started:
        answer = client.post(f"/langgraph/threads/{thread['thread_id']}/runs", json.dumps(
            {"assistant_id": "acquisition", "input": {"goal": "a budgeting app's TAM"}}),
            content_type="application/json")
    assert answer.status_code == 200, answer.content
    made = LangGraphRun.objects.get(id=answer.json()["run_id"])
    assert answer.json()["created_at"].startswith(made.created_at.isoformat()[:19])
    reads = [q["sql"] for q in started.captured_queries
             if q["sql"].lstrip().upper().startswith("SELECT")
             and "dashboard_langgraphrun" in q["sql"].split("WHERE")[0]]
    assert reads == []
    assert told == [doorbells.RUNS_GROUP]  # its own group: nobody could watch it yet


START_STATEMENTS = {
    # the thread (the door's read, its owner checked in Python); in one transaction: the
    # thread's row locked, then the user's (one statement), the thread's latest run read
    # (a statement after the lock: its snapshot sees what the request before decided), and
    # the run, its LangGraph run and its thread written with the user's queued runs
    # counted, as one statement
    "postgresql": 4,
    # the thread; in the IMMEDIATE transaction (SQLite's one write lock): the latest run,
    # the run (its INSERT counts the user's queued runs), its LangGraph run, its thread
    "sqlite": 5,
}
"""The statements of a start's request, beside its one transaction's begin and commit
(before: 10 on PostgreSQL, 8 on SQLite)."""

TRANSACTION = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK")


@pytest.mark.parametrize("path", ["runs", "runs/stream"])
def test_a_start_is_one_transaction_of_few_statements(client, told, path):
    thread = client.post("/langgraph/threads", "{}", content_type="application/json").json()
    with CaptureQueriesContext(connection) as started:
        answer = client.post(f"/langgraph/threads/{thread['thread_id']}/{path}", json.dumps(
            {"assistant_id": "acquisition", "input": {"goal": "a budgeting app's TAM"}}),
            content_type="application/json")
        if answer.streaming:
            answer.close()
    assert answer.status_code == 200
    sent = [" ".join(q["sql"].split()) for q in started.captured_queries]
    control = [sql for sql in sent if sql.upper().startswith(TRANSACTION)]
    statements = [sql[:120] for sql in sent if sql not in control]
    assert [sql.split()[0].upper() for sql in control] == ["BEGIN", "COMMIT"]
    assert len(statements) == START_STATEMENTS[connection.vendor], statements


def test_a_stream_request_hands_its_connection_back_before_it_streams(client, told):
    """The stream reads in short statements of its own (a new run's reads nothing at
    first): the request's connection is back in the pool as its response starts, not held
    for the whole stream (fifty streams took fifty of a pool of twelve)."""
    thread = client.post("/langgraph/threads", "{}", content_type="application/json").json()
    response = client.post(f"/langgraph/threads/{thread['thread_id']}/runs/stream",
                           json.dumps({"assistant_id": "acquisition",
                                       "input": {"goal": "a budgeting app's TAM"}}),
                           content_type="application/json")
    try:
        assert response.status_code == 200 and response.streaming
        assert connection.connection is None  # closed: back in the pool (CONN_MAX_AGE=0)
    finally:
        response.close()
