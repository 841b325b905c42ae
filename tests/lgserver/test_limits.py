"""Limits: past a user's (or the process's) open streams, or a user's queued runs, the
request is refused with 429 and a JSON detail naming the setting and the way out."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client

from dashboard import limits
from dashboard.models import Run
from dashboard.web.routing import websocket_urlpatterns
from tests.conftest import api_token

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def api(operator, executor):
    return Client(headers={"x-api-key": api_token(operator)})


def limit(settings, **values: int) -> None:
    settings.PLANWATCH = {**settings.PLANWATCH, **values}


@pytest.mark.parametrize("setting", ["MAX_STREAMS_PER_USER", "MAX_STREAMS_PER_PROCESS"])
def test_a_stream_past_a_limit_is_a_429_naming_it(api, settings, setting):
    limit(settings, **{setting: 1})
    held = limits.stream_slot_take(user=None)  # another stream of this process (and "user")
    try:
        if setting == "MAX_STREAMS_PER_USER":  # the held slot is not this user's
            assert limits.streams_open() == 1
            limit(settings, MAX_STREAMS_PER_USER=0)
        response = api.post("/langgraph/runs/stream", {"assistant_id": "test.echo",
                                                       "input": {"steps": 1}},
                            content_type="application/json")
        assert response.status_code == 429
        body = response.json()
        assert body["code"] == "limit_reached"
        assert body["errors"] == {"limit": f"PLANWATCH_{setting}"}
        assert f"PLANWATCH_{setting}" in body["detail"] and "close" in body["detail"]
        assert not Run.objects.exists()  # a refused stream starts no run
    finally:
        held.close()
    assert limits.streams_open() == 0


def test_a_stream_gives_its_slot_back_when_it_ends(api, settings):
    limit(settings, MAX_STREAMS_PER_USER=1)
    for _ in range(2):  # the second would be refused if the first kept its slot
        response = api.post("/langgraph/runs/stream", {"assistant_id": "test.echo",
                                                       "input": {"steps": 1}},
                            content_type="application/json")
        assert response.status_code == 200
        if _ == 0:
            assert b"id: " in async_to_sync(drain)(response)  # read to the end
        else:
            response.close()  # never read: closing gives the slot back
        assert limits.streams_open() == 0


async def drain(response) -> bytes:
    return b"".join([part async for part in response.streaming_content])


def test_a_run_past_the_users_queued_runs_is_a_429(api, settings, operator):
    limit(settings, MAX_QUEUED_RUNS_PER_USER=1)
    Run.objects.create(graph="test.echo", thread_id="waiting:planner", created_by=operator)
    response = api.post("/langgraph/runs", {"assistant_id": "test.echo",
                                            "input": {"steps": 1}},
                        content_type="application/json")
    assert response.status_code == 429
    assert response.json()["errors"] == {"limit": "PLANWATCH_MAX_QUEUED_RUNS_PER_USER"}
    assert "cancel" in response.json()["detail"]
    assert Run.objects.count() == 1


def test_enqueued_runs_count_against_the_users_queued_runs(api, settings, operator):
    """A thread's next runs (multitask "enqueue" behind a busy run) are queued runs like any:
    past the limit they are refused, and nothing is added to the thread."""
    limit(settings, MAX_QUEUED_RUNS_PER_USER=1)
    thread = api.post("/langgraph/threads", {}, content_type="application/json").json()
    busy = Run.objects.create(graph="test.echo", thread_id="busy:planner", created_by=operator,
                              conversation_id=thread["thread_id"], state=Run.State.RUNNING)
    response = api.post(f"/langgraph/threads/{thread['thread_id']}/runs",
                        {"assistant_id": "test.echo", "input": {"steps": 1},
                         "multitask_strategy": "enqueue"}, content_type="application/json")
    assert response.status_code == 200, response.content  # the first waits behind the busy run
    response = api.post(f"/langgraph/threads/{thread['thread_id']}/runs",
                        {"assistant_id": "test.echo", "input": {"steps": 1},
                         "multitask_strategy": "enqueue"}, content_type="application/json")
    assert response.status_code == 429
    assert response.json()["errors"] == {"limit": "PLANWATCH_MAX_QUEUED_RUNS_PER_USER"}
    assert Run.objects.filter(conversation_id=thread["thread_id"]).exclude(id=busy.id).count() == 1


def test_a_trace_socket_past_the_limit_is_closed_4429(settings, operator):
    limit(settings, MAX_STREAMS_PER_USER=1)
    run = Run.objects.create(graph="test.echo", thread_id="watched:planner",
                             created_by=operator, state=Run.State.RUNNING)

    async def scenario() -> tuple[bool, int | None, bool]:
        app = URLRouter(websocket_urlpatterns)
        first = WebsocketCommunicator(app, f"/ws/runs/{run.id}/?after=0")
        first.scope["user"] = operator
        second = WebsocketCommunicator(app, f"/ws/runs/{run.id}/?after=0")
        second.scope["user"] = operator
        assert (await first.connect(timeout=5))[0]
        ok, code = await second.connect(timeout=5)
        await first.disconnect()
        third = WebsocketCommunicator(app, f"/ws/runs/{run.id}/?after=0")
        third.scope["user"] = operator
        again, _ = await third.connect(timeout=5)
        await third.disconnect()
        return ok, code, again

    ok, code, again = async_to_sync(scenario)()
    assert not ok and code == 4429
    assert again  # the first socket gave its slot back


@pytest.mark.postgres
def test_a_burst_of_run_requests_queues_no_more_than_the_limit(settings, operator):
    """30 requests at once, a limit of 5: the count and the insert are one transaction
    under the user's lock, so exactly 5 runs are queued and the 25 others answer 429 (the
    check-then-act queued 6 on PostgreSQL)."""
    import threading

    from django.db import connection, connections

    if connection.vendor != "postgresql":
        pytest.skip("the race is PostgreSQL's (SQLite's transactions take one write lock)")
    # no executor: the runs stay queued (a worker's job waits for a worker that never comes)
    settings.PLANWATCH = {**settings.PLANWATCH, "EXECUTOR": "procrastinate",
                          "MAX_QUEUED_RUNS_PER_USER": 5}
    token = api_token(operator)
    start = threading.Barrier(30)
    statuses: list[int] = []

    def request() -> None:
        try:
            client = Client(headers={"x-api-key": token})
            start.wait()
            statuses.append(client.post("/langgraph/runs", {
                "assistant_id": "test.echo", "input": {"steps": 1}},
                content_type="application/json").status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=request) for _ in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] * 5 + [429] * 25
    assert Run.objects.filter(created_by=operator, state=Run.State.QUEUED).count() == 5


@pytest.mark.postgres
def test_a_start_counts_the_run_queued_by_the_request_it_waited_for(settings, operator):
    """Another request of the user holds the user's row with a run queued, not committed
    yet; a start on a thread of the same user (a limit of 1) waits for that row, then counts
    that run and answers 429. A count not behind the user's lock, or in the statement that
    waited for it (its snapshot from before the wait), sees no run and queues a second."""
    import threading

    import psycopg
    from django.db import connection, connections, transaction

    from dashboard.runs.savers import postgres_conninfo
    from tests.support.racing import wait_for_waiters

    if connection.vendor != "postgresql":
        pytest.skip("the race is PostgreSQL's (SQLite's transactions take one write lock)")
    # no executor: the runs stay queued (a worker's job waits for a worker that never comes)
    settings.PLANWATCH = {**settings.PLANWATCH, "EXECUTOR": "procrastinate",
                          "MAX_QUEUED_RUNS_PER_USER": 1}
    client = Client(headers={"x-api-key": api_token(operator)})
    thread = client.post("/langgraph/threads", {}, content_type="application/json").json()
    holding, release = threading.Event(), threading.Event()
    statuses: list[int] = []

    def hold() -> None:  # as a request that queues a run holds the user's row until it commits
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SELECT 1 FROM auth_user WHERE id = %s FOR UPDATE",
                                   [operator.pk])
                Run.objects.create(graph="test.echo", thread_id="held:planner",
                                   created_by=operator)
                holding.set()
                release.wait(60)
        finally:
            connections.close_all()

    def start() -> None:
        try:
            statuses.append(client.post(f"/langgraph/threads/{thread['thread_id']}/runs", {
                "assistant_id": "test.echo", "input": {"steps": 1}},
                content_type="application/json").status_code)
        finally:
            connections.close_all()

    holder, starter = threading.Thread(target=hold), threading.Thread(target=start)
    holder.start()
    try:
        assert holding.wait(60)
        starter.start()
        with psycopg.connect(postgres_conninfo(connection.settings_dict),
                             autocommit=True) as watcher:
            wait_for_waiters(watcher, 1)
        assert statuses == []  # it waits for the user's row
    finally:
        release.set()
        holder.join(60)
    starter.join(60)
    assert statuses == [429]
    assert Run.objects.filter(created_by=operator, state=Run.State.QUEUED).count() == 1
