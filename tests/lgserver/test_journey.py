"""The issue's SDK journey: an assistant with its own context, run, versioned; memories
stored and searched from inside the graph; a cron that fires; everything deleted."""

from __future__ import annotations

import pytest
from langgraph_sdk.errors import NotFoundError

from dashboard.models import Assistant, Cron, Run, Thread
from tests.support.lgserver import EVERY_SECOND, wait_for

# Not in the PostgreSQL pass: the API's shapes and the clients' protocol take the same
# path on both databases (what differs there: test_state, test_store, test_crons,
# test_deletes, test_one_running, test_cancel_join, test_input_bounds).
pytestmark = [pytest.mark.django_db(transaction=True)]


def test_assistant_context_versions_memories_cron_and_cleanup(sdk):
    aid = sdk.assistants.create("agent", name="journey", context={"model": "m1",
                                                                   "user": "jo"})["assistant_id"]
    thread = sdk.threads.create()
    tid = thread["thread_id"]
    out = sdk.runs.wait(tid, aid, input={"remember": "prefers email"})
    assert out["reply"] == "m1 for jo" and out["memories"] == ["prefers email"]
    assert sdk.assistants.update(aid, context={"model": "m2", "user": "jo"})["version"] == 2
    out = sdk.runs.wait(tid, aid, input={"remember": "works nights"})
    assert out["reply"] == "m2 for jo"
    assert out["memories"] == ["prefers email", "works nights"]  # read from inside the graph
    found = sdk.store.search_items(["memories", "jo"])["items"]
    assert sorted(i["key"] for i in found) == ["prefers email", "works nights"]
    cron = sdk.crons.create_for_thread(tid, aid, schedule=EVERY_SECOND,
                                       input={"remember": "cron ran"})
    wait_for(lambda: Run.objects.filter(metadata__cron_id=cron["cron_id"],
                                        status="succeeded").exists())
    assert "cron ran" in [i["key"] for i in sdk.store.search_items(["memories", "jo"])["items"]]
    assert [v["version"] for v in sdk.assistants.get_versions(aid)] == [2, 1]
    sdk.crons.delete(cron["cron_id"])
    wait_for(lambda: not Run.objects.filter(conversation=tid, status__in=(
        "queued", "running")).exists())
    for item in sdk.store.search_items(["memories", "jo"], limit=50)["items"]:
        sdk.store.delete_item(item["namespace"], item["key"])
    sdk.assistants.delete(aid, delete_threads=True)
    assert not Thread.objects.filter(id=tid).exists()
    assert not Assistant.objects.filter(id=aid).exists()
    assert not Cron.objects.exists()
    assert sdk.store.search_items(["memories", "jo"])["items"] == []
    with pytest.raises(NotFoundError):
        sdk.assistants.get(aid)
