"""Assistants created, versioned, searched and deleted through the official SDK, and the
context they (and a run request) give a graph's runtime."""

from __future__ import annotations

import pytest
from django.test import Client
from langgraph_sdk.errors import (
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    UnprocessableEntityError,
)

from dashboard.models import Assistant, Run, Thread
from tests.conftest import api_token

# Not in the PostgreSQL pass: the API's shapes and the clients' protocol take the same
# path on both databases (what differs there: test_state, test_store, test_crons,
# test_deletes, test_one_running, test_cancel_join, test_input_bounds).
pytestmark = [pytest.mark.django_db(transaction=True)]


def test_create_get_update_version_and_set_latest(sdk):
    made = sdk.assistants.create("agent", name="Support bot", description="answers",
                                 config={"configurable": {"shop": "north"}},
                                 context={"model": "m-small"}, metadata={"team": "care"})
    aid = made["assistant_id"]
    assert made["graph_id"] == "agent" and made["version"] == 1
    assert made["context"] == {"model": "m-small"} and made["name"] == "Support bot"
    assert sdk.assistants.get(aid)["metadata"] == {"team": "care"}
    with pytest.raises(ConflictError, match="exists"):
        sdk.assistants.create("agent", assistant_id=aid)
    assert sdk.assistants.create("agent", assistant_id=aid, if_exists="do_nothing"
                                 )["version"] == 1
    updated = sdk.assistants.update(aid, context={"model": "m-large"}, metadata={"tier": 2})
    assert updated["version"] == 2 and updated["context"] == {"model": "m-large"}
    assert updated["metadata"] == {"team": "care", "tier": 2}
    assert updated["name"] == "Support bot"  # what is not sent is kept
    versions = sdk.assistants.get_versions(aid)
    assert [v["version"] for v in versions] == [2, 1]
    assert versions[1]["context"] == {"model": "m-small"}
    back = sdk.assistants.set_latest(aid, 1)
    assert back["version"] == 1 and back["context"] == {"model": "m-small"}
    assert sdk.assistants.get(aid)["version"] == 1
    with pytest.raises(UnprocessableEntityError, match="no version 7"):
        sdk.assistants.set_latest(aid, 7)
    stored = Assistant.objects.get(id=aid)
    assert stored.versions.count() == 2 and stored.created_by_name == "sdk"


def test_search_and_count_by_graph_name_and_metadata_sorted_and_paged(sdk):
    for name in ("alpha", "beta", "gamma"):
        sdk.assistants.create("agent", name=f"{name} helper", metadata={"kind": name})
    sdk.assistants.create("orders", name="orders helper", metadata={"kind": "alpha"})
    mine = sdk.assistants.search(graph_id="agent", limit=50)
    assert {a["name"] for a in mine} == {"alpha helper", "beta helper", "gamma helper",
                                         "agent"}  # and the graph's own
    assert sdk.assistants.count(graph_id="agent") == 4
    assert [a["name"] for a in sdk.assistants.search(metadata={"kind": "alpha"},
                                                     sort_by="name", sort_order="asc")] == [
        "alpha helper", "orders helper"]
    assert sdk.assistants.count(name="HELPER") == 4
    ordered = sdk.assistants.search(name="helper", sort_by="name", sort_order="desc")
    assert [a["name"] for a in ordered] == ["orders helper", "gamma helper", "beta helper",
                                            "alpha helper"]
    page = sdk.assistants.search(name="helper", sort_by="name", sort_order="asc", limit=2,
                                 offset=1, response_format="object")
    assert [a["name"] for a in page["assistants"]] == ["beta helper", "gamma helper"]
    assert page["next"] == "3"
    with pytest.raises(UnprocessableEntityError, match="sort_by"):
        sdk.assistants.search(sort_by="colour")


def test_a_run_merges_the_assistants_context_and_config_and_records_its_version(
        sdk, sdk_user):
    aid = sdk.assistants.create("agent", context={"model": "m-small", "user": "ann"}
                                )["assistant_id"]
    thread = sdk.threads.create()
    out = sdk.runs.wait(thread["thread_id"], aid, input={})
    assert out["reply"] == "m-small for ann"
    # the request's context wins over the assistant's, key by key
    run = sdk.runs.create(thread["thread_id"], aid, input={}, context={"user": "bob"})
    assert run["assistant_id"] == aid
    sdk.runs.join(thread["thread_id"], run["run_id"])
    assert sdk.threads.get_state(thread["thread_id"])["values"]["reply"] == "m-small for bob"
    stored = Run.objects.get(id=run["run_id"])
    assert stored.assistant_id is not None and str(stored.assistant_id) == aid
    assert stored.assistant_version == 1
    sdk.assistants.update(aid, context={"model": "m-large", "user": "ann"})
    again = sdk.runs.create(thread["thread_id"], aid, input={})
    sdk.runs.join(thread["thread_id"], again["run_id"])
    assert Run.objects.get(id=again["run_id"]).assistant_version == 2
    web = Client()
    web.force_login(sdk_user)
    page = web.get(f"/runs/{again['run_id']}/").content.decode()
    assert f"{aid[:8]}" in page and "v2" in page  # the trace page names it


def test_the_request_context_reaches_a_graphs_own_assistant_and_runtime_factories(sdk):
    out = sdk.runs.wait(None, "bare", input={}, context={"model": "m-x", "user": "cy"})
    assert out["reply"] == "m-x for cy"
    # no context at all: the graph's context schema's defaults
    assert sdk.runs.wait(None, "agent", input={})["reply"] == "unset for nobody"


def test_delete_with_and_without_its_threads(sdk):
    aid = sdk.assistants.create("agent")["assistant_id"]
    thread = sdk.threads.create()
    sdk.runs.wait(thread["thread_id"], aid, input={})
    sdk.assistants.delete(aid)
    with pytest.raises(NotFoundError):
        sdk.assistants.get(aid)
    assert Thread.objects.filter(id=thread["thread_id"]).exists()  # kept
    assert Run.objects.get(conversation=thread["thread_id"]).graph == "agent"
    other = sdk.assistants.create("agent")["assistant_id"]
    gone = sdk.threads.create()
    sdk.runs.wait(gone["thread_id"], other, input={})
    sdk.assistants.delete(other, delete_threads=True)
    assert not Thread.objects.filter(id=gone["thread_id"]).exists()
    with pytest.raises(ConflictError, match="own assistant of graph 'agent'"):
        sdk.assistants.delete("agent")


def test_viewers_read_assistants_but_cannot_change_them(sdk, lg_url, viewer):
    from langgraph_sdk import get_sync_client

    aid = sdk.assistants.create("agent", name="shared")["assistant_id"]
    looker = get_sync_client(url=lg_url, api_key=api_token(viewer))
    assert looker.assistants.get(aid)["name"] == "shared"
    assert looker.assistants.get_versions(aid)
    for attempt in (lambda: looker.assistants.create("agent"),
                    lambda: looker.assistants.update(aid, name="x"),
                    lambda: looker.assistants.set_latest(aid, 1),
                    lambda: looker.assistants.delete(aid)):
        with pytest.raises(PermissionDeniedError, match=r"dashboard\.(start|delete)_run"):
            attempt()


def test_bad_assistant_requests_get_a_422_naming_the_field(sdk):
    with pytest.raises(UnprocessableEntityError, match="unknown graph 'nope'"):
        sdk.assistants.create("nope")
    with pytest.raises(UnprocessableEntityError, match="if_exists"):
        sdk.assistants.create("agent", if_exists="replace")
    with pytest.raises(UnprocessableEntityError, match="assistant_id"):
        sdk.assistants.create("agent", assistant_id="not-a-uuid")
    with pytest.raises(UnprocessableEntityError, match="context"):
        sdk.runs.create(None, "agent", input={}, context=["not", "an", "object"])
    with pytest.raises(NotFoundError):
        sdk.assistants.update("00000000-0000-0000-0000-000000000000", name="x")
