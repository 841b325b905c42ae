"""``/langgraph/`` and ``/api/`` bodies are parsed at the door: no input is a 500.

Each input below was a 500 (an HTML error page) before; now it is a 4xx JSON answer naming
the field, and nothing was written. Metadata filters are literal JSON: a key such as
``x__in`` is a key, never an ORM lookup.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from dashboard.models import Assistant, AssistantVersion, Cron, Run, StoreItem, Thread
from tests.conftest import api_token

pytestmark = [pytest.mark.pg, pytest.mark.django_db]  # 1e400 and long names broke PostgreSQL first

INF = "1e400"  # valid JSON; Python's json reads it as float("inf")
LONG_SCHEDULE = ",".join(str(m) for m in range(60)) + " * * * *"  # valid, 175 characters


@pytest.fixture
def client(django_user_model) -> Client:
    user = django_user_model.objects.create_user(username="hostile", password="pw-hostile-1")
    user.user_permissions.set(Permission.objects.filter(codename__in=[
        "start_run", "delete_run", "fork_run", "view_all_threads"]))
    token = api_token(user)
    return Client(headers={"x-api-key": token, "Authorization": f"Token {token}"})


def send(client: Client, method: str, path: str, raw: str) -> Any:
    """Send ``raw`` (JSON text, so 1e400 reaches the parser as written)."""
    return getattr(client, method)(path, raw, content_type="application/json")


def written() -> dict[str, int]:
    return {model.__name__: model.objects.count()
            for model in (Assistant, AssistantVersion, Cron, Thread, Run, StoreItem)}


@pytest.fixture
def ids(client) -> dict[str, str]:
    """An assistant and a thread to aim at."""
    made = send(client, "post", "/langgraph/assistants",
                json.dumps({"graph_id": "acquisition", "name": "a"})).json()
    thread = send(client, "post", "/langgraph/threads", "{}").json()
    cron = send(client, "post", "/langgraph/runs/crons", json.dumps(
        {"assistant_id": "acquisition", "schedule": "0 3 * * *"})).json()
    return {"assistant": made["assistant_id"], "thread": thread["thread_id"],
            "cron": cron["cron_id"]}


CRON = '{"assistant_id": "acquisition", "schedule": "0 3 * * *", '
REFUSED = [
    # (method, path, body, the field the answer names)
    *[("post", path, f'{{"limit": {INF}}}', "limit") for path in (
        "/langgraph/threads/search", "/langgraph/assistants/search",
        "/langgraph/runs/crons/search", "/langgraph/threads/{thread}/history",
        "/langgraph/store/items/search", "/langgraph/store/namespaces",
        "/langgraph/assistants/{assistant}/versions")],
    ("post", "/langgraph/threads/search", f'{{"offset": -{INF}}}', "offset"),
    ("post", "/langgraph/threads", f'{{"metadata": {{"x": {INF}}}}}', "metadata.x"),
    ("post", "/langgraph/assistants",
     f'{{"graph_id": "acquisition", "config": {{"configurable": {{"x": [{INF}]}}}}}}',
     "config.configurable.x[0]"),
    ("post", "/langgraph/assistants",
     f'{{"graph_id": "acquisition", "metadata": {{"x": {INF}}}}}', "metadata.x"),
    ("post", "/langgraph/threads/{thread}/runs",
     f'{{"assistant_id": "acquisition", "input": {{"goal": {INF}}}}}', "input.goal"),
    ("post", "/langgraph/runs/crons", CRON + f'"input": {{"goal": {INF}}}}}', "input.goal"),
    ("post", "/api/runs/", f'{{"graph": "acquisition", "input": {{"goal": {INF}}}}}',
     "input.goal"),
    *[("put", "/langgraph/store/items",
       f'{{"namespace": ["n"], "key": "k", "value": {{}}, "ttl": {ttl}}}', "ttl")
      for ttl in ("1e-9", "1e12", "1e19", str(2**62), INF)],
    ("put", "/langgraph/store/items", '{"namespace": ["n"], "key": "k", "value": {"x": 1e400}}',
     "value.x"),
    ("post", "/langgraph/store/items/search", '{"filter": {"x": {"$bogus": 1}}}', "filter.x"),
    ("post", "/langgraph/store/items/search", '{"filter": {"x\'); --": 1}}', "filter"),
    ("post", "/langgraph/runs/crons", CRON.replace("0 3 * * *", LONG_SCHEDULE) + '"x": 1}',
     "schedule"),
    ("patch", "/langgraph/runs/crons/{cron}", json.dumps({"schedule": LONG_SCHEDULE}),
     "schedule"),
    *[("post", "/langgraph/runs/crons", CRON + f'"end_time": "{end}"}}', "end_time")
      for end in ("2026-13-45T00:00:00", "2026-01-01T25:00Z", "2026-01-01T00:00:00+99:00")],
    ("patch", "/langgraph/runs/crons/{cron}", '{"end_time": "2026-13-45T00:00:00"}',
     "end_time"),
    ("post", "/langgraph/assistants", json.dumps({"graph_id": "acquisition", "name": "n" * 201}),
     "name"),
    ("patch", "/langgraph/assistants/{assistant}", json.dumps({"name": "n" * 201}), "name"),
    ("post", "/langgraph/assistants/{assistant}/latest", f'{{"version": {INF}}}', "version"),
    ("post", "/langgraph/assistants/{assistant}/latest", '{"version": 1e300}', "version"),
    ("post", "/langgraph/threads", json.dumps({"metadata": {"graph_id": "g" * 101}}),
     "metadata.graph_id"),
    ("post", "/langgraph/runs", '{"assistant_id": "acquisition", "context": ["x"]}', "context"),
]


@pytest.mark.parametrize(("method", "path", "raw", "field"), REFUSED,
                         ids=[f"{m} {p} {r[:40]}" for m, p, r, _ in REFUSED])
def test_an_input_out_of_bounds_is_a_4xx_naming_its_field(client, ids, method, path, raw,
                                                          field):
    before = written()
    response = send(client, method, path.format(**ids), raw)
    assert 400 <= response.status_code < 500, response.content[:300]
    answer = response.json()
    assert field in answer["detail"], answer
    assert written() == before


LOOKUPS = [{"x__in": [1]}, {"x__regex": "("}, {"x__isnull": True}, {"x__has_key": "a"},
           {"x__range": [1, 2]}, {"x__iregex": "("}, {"x__contains": "a"}]


@pytest.mark.parametrize("path", [
    "/langgraph/assistants/search", "/langgraph/assistants/count",
    "/langgraph/assistants/{assistant}/versions", "/langgraph/runs/crons/search",
    "/langgraph/runs/crons/count", "/langgraph/threads/search"])
def test_metadata_filters_are_literal_json_keys(client, ids, path):
    """A key such as ``x__in`` is the key "x__in": found only where metadata has it."""
    made = send(client, "post", "/langgraph/assistants", json.dumps(
        {"graph_id": "acquisition", "metadata": {"x": 1, "x__in": [1]}})).json()
    send(client, "post", "/langgraph/runs/crons", json.dumps(
        {"assistant_id": "acquisition", "schedule": "0 3 * * *",
         "metadata": {"x": 1, "x__in": [1]}}))
    send(client, "post", "/langgraph/threads", json.dumps({"metadata": {"x": 1, "x__in": [1]}}))
    path = path.format(assistant=made["assistant_id"])
    found = {}
    for metadata in LOOKUPS:
        response = send(client, "post", path, json.dumps({"metadata": metadata}))
        assert response.status_code == 200, (metadata, response.content[:300])
        answer = response.json()
        found[next(iter(metadata))] = answer if isinstance(answer, int) else len(answer)
    assert found == {"x__in": 1, "x__regex": 0, "x__isnull": 0, "x__has_key": 0,
                     "x__range": 0, "x__iregex": 0, "x__contains": 0}
    exact = send(client, "post", path, json.dumps({"metadata": {"x": 1}})).json()
    assert (exact if isinstance(exact, int) else len(exact)) == 1


@pytest.mark.django_db(transaction=True)  # the store writes on a connection of its own
def test_store_search_takes_langgraphs_operators(client):
    for n in (1, 2, 3):
        assert send(client, "put", "/langgraph/store/items", json.dumps(
            {"namespace": ["ops"], "key": f"k{n}", "value": {"n": n}, "ttl": 5})
        ).status_code == 204
    got = {}
    for op in ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte"):
        response = send(client, "post", "/langgraph/store/items/search",
                        json.dumps({"namespace_prefix": ["ops"], "filter": {"n": {op: 2}}}))
        assert response.status_code == 200, response.content
        got[op] = sorted(i["value"]["n"] for i in response.json()["items"])
    assert got == {"$eq": [2], "$ne": [1, 3], "$gt": [3], "$gte": [2, 3], "$lt": [1],
                   "$lte": [1, 2]}


def test_a_thread_id_that_is_not_a_uuid_is_a_404_not_a_500(client):
    assert send(client, "post", f"/langgraph/threads/{uuid.uuid4()}x/history", "{}"
                ).status_code == 404
