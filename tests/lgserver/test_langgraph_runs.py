"""A LangGraph run is one run request (issue 41, stage b): the official SDK's start, two
resumes, a fork and a re-run on one thread are five runs in ``runs.list``, each joinable,
each naming its own checkpoints; the operator's ``Run`` (the pages, ``/api/``) is one goal
across its resumes, its LangGraph runs listed with it."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from dashboard.models import LangGraphRun, Run, RunEvent
from tests.conftest import assert_gapless

pytestmark = [pytest.mark.django_db(transaction=True)]

GOAL = {"goal": "Estimate the TAM of a budgeting app"}


def _asked(values: dict) -> str:
    """The field the thread's question asks for ("" if none waits)."""
    asked = values.get("__interrupt__") or []
    return asked[0]["value"]["field"] if asked else ""


def test_start_two_resumes_a_fork_and_a_rerun_are_five_runs_each_with_its_checkpoints(
        sdk, sdk_user):
    tid = sdk.threads.create()["thread_id"]
    first = sdk.runs.create(tid, "acquisition", input=GOAL)
    assert _asked(sdk.runs.join(tid, first["run_id"])) == "core.region"
    # a resume is a run of its own: its id joins it, and its stream names it
    second = sdk.runs.create(tid, "acquisition", command={"resume": "Germany"})
    assert second["run_id"] != first["run_id"]
    assert _asked(sdk.runs.join(tid, second["run_id"])) == "core.currency"
    parts = list(sdk.runs.stream(tid, "acquisition", command={"resume": "EUR"},
                                 stream_mode="updates"))
    third = parts[0].data
    assert parts[0].event == "metadata" and third["run_id"] not in (first["run_id"],
                                                                    second["run_id"])
    assert [p.data["__interrupt__"][0]["value"]["field"] for p in parts
            if p.event == "updates" and "__interrupt__" in p.data] == ["market.price"]
    assert sdk.runs.get(tid, first["run_id"])["status"] == "interrupted"  # went on after
    assert sdk.runs.get(tid, third["run_id"])["status"] == "interrupted"  # waits

    history = sdk.threads.get_history(tid, limit=200)
    asked_region = next(s for s in history if s["metadata"].get("run_id") == first["run_id"])
    fork = sdk.runs.create(tid, "acquisition",
                           checkpoint_id=asked_region["checkpoint"]["checkpoint_id"])
    assert _asked(sdk.runs.join(tid, fork["run_id"])) == "core.region"  # asked again
    rerun = sdk.runs.create(tid, "acquisition", input={**GOAL, "region": "Germany",
                                                       "currency": "EUR"})
    sdk.runs.join(tid, rerun["run_id"])

    five = [rerun["run_id"], fork["run_id"], third["run_id"], second["run_id"],
            first["run_id"]]
    listed = sdk.runs.list(tid, limit=10)
    assert [r["run_id"] for r in listed] == five  # newest first
    assert [r["status"] for r in listed[1:]] == ["interrupted"] * 4  # went on, cancelled
    interrupted = [r["run_id"] for r in listed if r["status"] == "interrupted"]
    assert [r["run_id"] for r in sdk.runs.list(tid, status="interrupted")] == interrupted
    assert sdk.runs.list(tid, status="success") == [r for r in listed
                                                    if r["status"] == "success"]
    for run_id in five:  # each joinable, at once for those that ended
        assert isinstance(sdk.runs.join(tid, run_id), dict)
        assert sdk.runs.get(tid, run_id)["run_id"] == run_id
    # each names its own checkpoints (LangGraph's server writes run_id so)
    named = {s["metadata"].get("run_id") for s in sdk.threads.get_history(tid, limit=500)}
    assert set(five) <= named

    # the operator's units: the goal across its resumes, the fork, the re-run
    goal = Run.objects.get(id=first["run_id"])
    assert goal.langgraph_run_ids() == [third["run_id"], second["run_id"], first["run_id"]]
    assert Run.objects.filter(conversation_id=tid).count() == 3
    events = assert_gapless(goal)
    starts = dict(LangGraphRun.objects.filter(run=goal).values_list("id", "first_seq"))
    resumed = [e.seq for e in events if e.kind == RunEvent.Kind.RUN_RESUMED]
    assert sorted(starts.values())[1:] == resumed  # each resume's events from its claim on
    api = APIClient()
    api.force_authenticate(sdk_user)
    shown = api.get(f"/api/runs/{goal.id}/").json()
    assert [r["id"] for r in shown["langgraph_runs"]] == five[:1:-1]
    assert [r["status"] for r in shown["langgraph_runs"]] == ["interrupted"] * 3
    checkpoints = api.get(f"/api/runs/{goal.id}/checkpoints/?limit=500").json()
    assert {c["metadata"]["run_id"] for c in checkpoints} == set(five[2:])


def test_a_langgraph_run_that_went_on_streams_its_own_events_and_is_not_cancelled(sdk):
    tid = sdk.threads.create()["thread_id"]
    first = sdk.runs.create(tid, "acquisition", input=GOAL)
    sdk.runs.join(tid, first["run_id"])
    second = sdk.runs.create(tid, "acquisition", command={"resume": "Germany"})
    sdk.runs.join(tid, second["run_id"])
    # its events, from the first on, end where the resume's begin
    parts = list(sdk.runs.join_stream(tid, first["run_id"], stream_mode="updates",
                                      last_event_id="0"))
    asked = [p.data["__interrupt__"][0]["value"]["field"] for p in parts
             if p.event == "updates" and "__interrupt__" in p.data]
    assert asked == ["core.region"]
    from langgraph_sdk.errors import ConflictError, NotFoundError

    with pytest.raises(NotFoundError, match="interrupted, neither pending nor running"):
        sdk.runs.cancel(tid, first["run_id"])
    with pytest.raises(ConflictError, match=f"delete run {first['run_id']}"):
        sdk.runs.delete(tid, second["run_id"])
    sdk.runs.delete(tid, first["run_id"])  # the Run, its resume with it
    assert sdk.runs.list(tid) == []
