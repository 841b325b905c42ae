"""``/langgraph/`` against hostile and careless input, and who sees which thread.

Never a 5xx: metadata filters are literal JSON keys, numbers a checkpoint cannot hold are
refused at the door, LangGraph's own config keys and webhooks are refused with 422 naming
them, bodies too large get a JSON 413 (chunked ones too), bad cursors a 404. Thread search
and run lists filter and page in SQL, with a bounded offset. A user sees and acts on their
own threads only, unless they may see all.
"""

from __future__ import annotations

import http.client
import json
import uuid
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from dashboard import services
from dashboard.models import LangGraphRun, Run, Thread
from dashboard.runs import store
from tests.conftest import api_token

pytestmark = pytest.mark.django_db

PERMS = ["start_run", "cancel_run", "answer_interrupt", "debug_run", "fork_run", "delete_run"]


def make_user(django_user_model, name: str, *extra: str):
    user = django_user_model.objects.create_user(username=name, password=f"pw-{name}-12345")
    user.user_permissions.set(Permission.objects.filter(codename__in=[*PERMS, *extra]))
    return user


@pytest.fixture
def alice(django_user_model):
    return make_user(django_user_model, "alice")


def api(user) -> Client:
    """A LangGraph client of ``user``: JSON, with the user's token as ``x-api-key``."""
    return Client(headers={"x-api-key": api_token(user)})


def post(client: Client, path: str, data) -> tuple[int, dict]:
    response = client.post(f"/langgraph{path}", json.dumps(data), content_type="application/json")
    assert response.status_code < 500, response.content
    return response.status_code, response.json() if response.content else {}


def thread_with_run(user, status: str, metadata=None) -> Thread:
    """A thread of ``user`` whose latest run has ``status`` (stored directly: no executor)."""
    thread = services.thread_create(user=user, metadata=metadata or {}, graph="acquisition")
    run_id = uuid.uuid4()
    run = Run.objects.create(id=run_id, graph="acquisition", thread_id=f"{run_id}:planner",
                             state=status, conversation=thread, created_by=user)
    LangGraphRun.objects.create(id=run_id, run=run, first_seq=1)  # the request that made it
    # what the run's transitions would have written to its thread
    store.set_thread_status(run_id, store.THREAD_STATUS[Run.State(status)])
    return thread


def test_metadata_keys_are_literal_json_keys_never_orm_lookups(alice):
    client = api(alice)
    thread_with_run(alice, "succeeded", {"owner": "op", "x": [1, 2], "x__in": 5})
    hostile = [{"x__in": 5}, {"x__regex": "("}, {"x__gt": {}}, {"x__contains": [1]},
               {"x__range": [1, 2]}, {"x__contained_by": {}}, {"owner__startswith": "op"}]
    found = {}
    for metadata in hostile:
        code, body = post(client, "/threads/search", {"metadata": metadata})
        assert code == 200, (metadata, body)
        found[next(iter(metadata))] = len(body)
    # only the thread whose metadata really has the key "x__in" with 5 matches
    assert found == {"x__in": 1, "x__regex": 0, "x__gt": 0, "x__contains": 0, "x__range": 0,
                     "x__contained_by": 0, "owner__startswith": 0}
    assert len(post(client, "/threads/search", {"metadata": {"owner": "op"}})[1]) == 1
    assert len(post(client, "/threads/search", {"metadata": {"x": [1, 2]}})[1]) == 1


def test_integers_beyond_64_bits_are_refused_naming_where(alice):
    client = api(alice)
    thread = thread_with_run(alice, "succeeded")
    code, body = post(client, f"/threads/{thread.id}/state",
                      {"values": {"steps": 10**30}, "as_node": "tick"})
    assert code == 422 and "values.steps" in json.dumps(body)
    code, body = post(client, f"/threads/{thread.id}/runs",
                      {"assistant_id": "acquisition", "input": {"goal": "x", "n": [2**64]}})
    assert code == 422 and "input.n[0]" in json.dumps(body)
    assert not Run.objects.filter(conversation=thread).exclude(status="succeeded").exists()


@pytest.mark.parametrize("key", ["__pregel_checkpointer", "__pregel_runtime", "checkpoint_map",
                                 "checkpoint_ns", "thread_id", "__anything"])
def test_langgraphs_reserved_config_keys_are_refused(alice, key):
    thread = thread_with_run(alice, "succeeded")
    code, body = post(api(alice), f"/threads/{thread.id}/runs", {
        "assistant_id": "acquisition", "input": {"goal": "x"},
        "config": {"configurable": {key: "x"}}})
    assert code == 422 and key in body["detail"]


def test_a_webhook_is_refused_naming_it(alice):
    thread = thread_with_run(alice, "succeeded")
    code, body = post(api(alice), f"/threads/{thread.id}/runs", {
        "assistant_id": "acquisition", "input": {"goal": "x"},
        "webhook": "https://example.com/hook"})
    assert code == 422 and "webhook" in body["detail"]
    assert Run.objects.filter(conversation=thread).count() == 1


def test_thread_search_filters_status_in_sql_and_bounds_the_offset(alice, settings):
    client = api(alice)
    made = {status: thread_with_run(alice, status)
            for status in ("running", "interrupted", "failed", "succeeded")}
    expected = {"busy": "running", "interrupted": "interrupted", "error": "failed",
                "idle": "succeeded"}
    for lg_status, status in expected.items():
        code, body = post(client, "/threads/search", {"status": lg_status})
        assert code == 200
        assert [t["thread_id"] for t in body] == [str(made[status].id)]
        assert body[0]["status"] == lg_status
    code, body = post(client, "/threads/search", {"status": "sleepy"})
    assert code == 422 and "sleepy" in body["detail"]
    first, second = (post(client, "/threads/search", {"limit": 2, "offset": o})[1]
                     for o in (0, 2))
    assert len({t["thread_id"] for t in first + second}) == 4
    settings.PLANWATCH_MAX_SEARCH_OFFSET = 100
    code, body = post(client, "/threads/search", {"offset": 101})
    assert code == 422 and "PLANWATCH_MAX_SEARCH_OFFSET" in body["detail"]


def test_run_list_filters_status_in_sql(alice):
    client = api(alice)
    thread = thread_with_run(alice, "failed")
    for status in ("succeeded", "succeeded"):
        run_id = uuid.uuid4()
        run = Run.objects.create(id=run_id, graph="acquisition", thread_id=f"{run_id}:planner",
                                 state=status, conversation=thread)
        LangGraphRun.objects.create(id=run_id, run=run, first_seq=1)
    listed = client.get(f"/langgraph/threads/{thread.id}/runs?status=success&limit=1").json()
    assert [r["status"] for r in listed] == ["success"]  # filtered before the page was cut
    listed = client.get(f"/langgraph/threads/{thread.id}/runs?status=error").json()
    assert [r["status"] for r in listed] == ["error"]
    refused = client.get(f"/langgraph/threads/{thread.id}/runs?status=nope")
    assert refused.status_code == 422


def test_a_crafted_rest_cursor_is_a_404_not_a_500(alice):
    import base64

    client = Client()
    client.force_login(alice)
    for position in ("p=2026-99-99", "p=" + "9" * 400, "p=not-a-date&r=1"):
        cursor = base64.b64encode(position.encode()).decode()
        response = client.get(f"/api/runs/?cursor={cursor}")
        assert response.status_code in (400, 404), (position, response.status_code)
        assert "cursor" in response.json()["detail"].lower()


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_too_large_gets_a_json_413(live_server_url, django_user_model):
    user = make_user(django_user_model, "chunky")
    parts = urlsplit(live_server_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    chunk = b'{"metadata": {"x": "' + b"a" * (10 * 1024 * 1024) + b'"}}'
    conn.putrequest("POST", "/langgraph/threads/search")
    conn.putheader("x-api-key", api_token(user))
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    for i in range(0, len(chunk), 1 << 20):
        piece = chunk[i:i + (1 << 20)]
        conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    conn.send(b"0\r\n\r\n")
    response = conn.getresponse()
    assert response.status == 413
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in json.loads(response.read())["detail"]


def test_a_user_sees_and_acts_only_on_their_own_threads(alice, django_user_model):
    bob = make_user(django_user_model, "bob")
    boss = make_user(django_user_model, "boss", "view_all_threads")
    theirs = thread_with_run(alice, "interrupted", {"team": "a"})
    tid = theirs.id
    run_id = theirs.runs.get().id
    as_bob = api(bob)
    assert post(as_bob, "/threads/search", {})[1] == []
    assert post(as_bob, "/threads/search", {"ids": [str(tid)]})[1] == []
    for method, path, data in [
        ("get", f"/threads/{tid}", None), ("patch", f"/threads/{tid}", {"metadata": {"x": 1}}),
        ("delete", f"/threads/{tid}", None), ("get", f"/threads/{tid}/state", None),
        ("post", f"/threads/{tid}/state", {"values": {}}),
        ("post", f"/threads/{tid}/history", {}), ("get", f"/threads/{tid}/runs", None),
        ("post", f"/threads/{tid}/runs", {"assistant_id": "acquisition",
                                          "command": {"resume": "Germany"}}),
        ("post", f"/threads/{tid}/runs/wait", {"assistant_id": "acquisition",
                                               "input": {"goal": "x"},
                                               "if_not_exists": "create"}),
        ("get", f"/threads/{tid}/runs/{run_id}", None),
        ("post", f"/threads/{tid}/runs/{run_id}/cancel", {}),
        ("delete", f"/threads/{tid}/runs/{run_id}", None),
    ]:
        response = getattr(as_bob, method)(f"/langgraph{path}", json.dumps(data) if data else "",
                                           content_type="application/json")
        assert response.status_code == 404, (method, path, response.status_code)
    code, _ = post(as_bob, "/threads", {"thread_id": str(tid), "if_exists": "do_nothing"})
    assert code == 409
    theirs.refresh_from_db()
    assert theirs.metadata == {"team": "a"} and theirs.runs.get().status == "interrupted"
    # their owner and a user who may see all threads see it
    assert [t["thread_id"] for t in post(api(alice), "/threads/search", {})[1]] == [str(tid)]
    assert [t["thread_id"] for t in post(api(boss), "/threads/search", {})[1]] == [str(tid)]
    assert api(boss).get(f"/langgraph/threads/{tid}").status_code == 200
    # a thread bob creates is bob's
    code, made = post(as_bob, "/threads", {})
    assert Thread.objects.get(id=made["thread_id"]).created_by == bob


def test_a_search_page_costs_the_same_few_queries_whatever_its_size(alice,
                                                                    django_assert_max_num_queries):
    """The threads' statuses are a column and their latest runs are read together: a page
    of 30 threads asks the database no more than a page of one (states are read on the
    saver's own connection)."""
    client = api(alice)
    for i in range(30):
        thread_with_run(alice, "interrupted" if i % 2 else "failed", {"team": "t1"})
    post(client, "/threads/search", {"limit": 1})  # the token's and the user's caches warm
    with django_assert_max_num_queries(8) as one:
        code, body = post(client, "/threads/search", {"status": "error", "limit": 1,
                                                      "metadata": {"team": "t1"}})
    assert code == 200 and len(body) == 1
    with django_assert_max_num_queries(len(one.captured_queries)):
        code, body = post(client, "/threads/search", {"status": "interrupted", "limit": 30,
                                                      "metadata": {"team": "t1"}})
    assert code == 200 and len(body) == 15
    assert {t["status"] for t in body} == {"interrupted"}
