"""Thread state read and written as LangGraph's server does, through the official SDK:
``POST /state`` with ``{}``, ``values: null``, an empty object, a list of updates, an
update at a given checkpoint, ``GET /state/<checkpoint_id>``, ``POST /state/checkpoint``
and ``subgraphs=true``."""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from tests.conftest import api_token

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def napped(sdk):
    """A thread whose ``nap`` run ended: ``{"seconds": 0, "done": True}``."""
    thread = sdk.threads.create()
    sdk.runs.wait(thread["thread_id"], "nap", input={"seconds": 0})
    return thread["thread_id"]


def post(lg_url, user, path: str, payload) -> httpx.Response:
    return httpx.post(f"{lg_url}{path}", json=payload, timeout=30,
                      headers={"x-api-key": api_token(user)})


def test_an_empty_update_writes_a_checkpoint_with_the_same_values(sdk, napped, lg_url,
                                                                    sdk_user):
    before = sdk.threads.get_state(napped)
    answer = post(lg_url, sdk_user, f"/threads/{napped}/state", {})
    assert answer.status_code == 200, answer.text
    new_id = answer.json()["checkpoint"]["checkpoint_id"]
    after = sdk.threads.get_state(napped)
    assert after["checkpoint"]["checkpoint_id"] == new_id != before["checkpoint"]["checkpoint_id"]
    assert after["values"] == before["values"] == {"seconds": 0, "done": True}


def test_values_null_and_an_empty_object_change_nothing(sdk, napped):
    for values in (None, {}):
        sdk.threads.update_state(napped, values)
        assert sdk.threads.get_state(napped)["values"] == {"seconds": 0, "done": True}


def test_a_list_of_updates_is_applied_in_order(sdk, napped):
    made = sdk.threads.update_state(napped, [{"seconds": 2}, {"done": False}], as_node="nap")
    state = sdk.threads.get_state(napped)
    assert state["values"] == {"seconds": 2, "done": False}
    assert state["checkpoint"]["checkpoint_id"] == made["checkpoint"]["checkpoint_id"]


def test_an_update_as_start_is_taken_as_input_and_the_graph_goes_on_from_there(sdk, napped):
    """``as_node="__start__"`` (LangGraph's compiled graphs have that node): the update is
    the graph's input, its next node the one after the start."""
    made = sdk.threads.update_state(napped, {"seconds": 5}, as_node="__start__")
    state = sdk.threads.get_state(napped)
    assert state["checkpoint"]["checkpoint_id"] == made["checkpoint"]["checkpoint_id"]
    assert made["checkpoint_id"] == made["checkpoint"]["checkpoint_id"]
    assert state["values"]["seconds"] == 5 and state["next"] == ["nap"]
    made = sdk.threads.update_state(napped, [{"seconds": 1}, {"done": False}],
                                    as_node="__start__")
    assert sdk.threads.get_state(napped)["values"] == {"seconds": 1, "done": False}


def test_an_update_of_a_thread_with_no_run_is_400_saying_it_has_no_graph(sdk, lg_url,
                                                                       sdk_user):
    """As LangGraph's server answers a thread with no graph ID: 400, not a conflict."""
    thread = sdk.threads.create()
    answer = post(lg_url, sdk_user, f"/threads/{thread['thread_id']}/state",
                  {"values": {"seconds": 1}})
    assert answer.status_code == 400, answer.text
    assert "no associated graph" in answer.json()["detail"]
    assert "start a run" in answer.json()["detail"]
    named = sdk.threads.create(graph_id="nap")  # a graph, but no run's log to record it in
    answer = post(lg_url, sdk_user, f"/threads/{named['thread_id']}/state",
                  {"values": {"seconds": 1}})
    assert answer.status_code == 409 and "has no run yet" in answer.json()["detail"]


def test_a_bad_item_of_a_list_is_422_naming_it_and_nothing_is_written(sdk, napped):
    before = sdk.threads.get_state(napped)
    with pytest.raises(UnprocessableEntityError, match="nope"):
        sdk.threads.update_state(napped, [{"seconds": 2}, {"nope": 1}])
    with pytest.raises(UnprocessableEntityError, match="values"):
        sdk.threads.update_state(napped, [{"seconds": 2}, "text"])
    assert sdk.threads.get_state(napped) == before


def test_an_update_at_a_given_checkpoint_branches_from_it(sdk, napped):
    history = sdk.threads.get_history(napped, limit=10)
    first = history[-1]["checkpoint"]  # the input checkpoint
    made = sdk.threads.update_state(napped, {"seconds": 7}, as_node="nap", checkpoint=first)
    state = sdk.threads.get_state(napped)
    assert state["checkpoint"]["checkpoint_id"] == made["checkpoint"]["checkpoint_id"]
    assert state["values"]["seconds"] == 7
    assert state["parent_checkpoint"]["checkpoint_id"] == first["checkpoint_id"]
    again = sdk.threads.update_state(napped, {"seconds": 8}, as_node="nap",
                                     checkpoint_id=first["checkpoint_id"])
    assert sdk.threads.get_state(napped)["checkpoint"]["checkpoint_id"] == again[
        "checkpoint"]["checkpoint_id"]


def test_state_at_a_checkpoint_by_get_and_by_post(sdk, napped):
    history = sdk.threads.get_history(napped, limit=10)
    latest, first = history[0]["checkpoint"], history[-1]["checkpoint"]
    by_get = sdk.threads.get_state(napped, checkpoint_id=latest["checkpoint_id"])
    by_post = sdk.threads.get_state(napped, checkpoint=latest)
    assert by_get["values"] == by_post["values"] == {"seconds": 0, "done": True}
    assert by_post["checkpoint"]["checkpoint_id"] == latest["checkpoint_id"]
    earlier = sdk.threads.get_state(napped, checkpoint={"checkpoint_id": first[
        "checkpoint_id"]})
    assert earlier["checkpoint"]["checkpoint_id"] == first["checkpoint_id"]
    assert earlier["next"] == history[-1]["next"]


def test_state_checkpoint_post_refuses_what_is_not_a_checkpoint(sdk, napped, lg_url,
                                                                 sdk_user):
    answer = post(lg_url, sdk_user, f"/threads/{napped}/state/checkpoint", {})
    assert answer.status_code == 422 and "checkpoint" in answer.text
    answer = post(lg_url, sdk_user, f"/threads/{napped}/state/checkpoint",
                  {"checkpoint": "x"})
    assert answer.status_code == 422 and "checkpoint" in answer.text
    with pytest.raises((NotFoundError, UnprocessableEntityError)):
        sdk.threads.get_state(napped, checkpoint={"checkpoint_id": "nope"})


def test_subgraphs_true_gives_each_waiting_subgraphs_state_in_its_task(sdk):
    thread = sdk.threads.create()
    sdk.runs.wait(thread["thread_id"], "deep", input={"count": 1})
    state = sdk.threads.get_state(thread["thread_id"], subgraphs=True)
    (outer,) = state["tasks"]
    assert outer["name"] == "middle" and outer["state"]["values"] == {"count": 1}
    (inner,) = outer["state"]["tasks"]
    assert inner["name"] == "child" and inner["state"]["next"] == ["ask_inside"]
    assert inner["state"]["tasks"][0]["interrupts"][0]["value"] == {
        "question": "How many more?"}
    flat = sdk.threads.get_state(thread["thread_id"])
    assert flat["tasks"][0]["state"] is None
    assert flat["tasks"][0]["checkpoint"]["checkpoint_ns"].startswith("middle:")
    at = sdk.threads.get_state(thread["thread_id"], checkpoint=flat["checkpoint"],
                               subgraphs=True)
    assert at["tasks"][0]["state"]["tasks"][0]["name"] == "child"
    sdk.runs.wait(thread["thread_id"], "deep", command={"resume": 2})
    assert sdk.threads.get_state(thread["thread_id"])["values"] == {"count": 3}


def test_a_thread_is_one_checkpoint_thread_and_an_update_at_an_earlier_runs_checkpoint_works(
        sdk, napped):
    sdk.runs.wait(napped, "nap", input={"seconds": 1})  # the thread's second run
    first_run, second_run = sorted(sdk.runs.list(napped), key=lambda r: r["created_at"])
    history = sdk.threads.get_history(napped, limit=50)
    ids = [state["checkpoint"]["checkpoint_id"] for state in history]
    assert len(ids) == len(set(ids))  # no copy of the checkpoint the second run went on from
    by_id = {state["checkpoint"]["checkpoint_id"]: state for state in history}
    named = [state["metadata"]["run_id"] for state in history]
    assert set(named) == {first_run["run_id"], second_run["run_id"]}
    # the second run's first checkpoint goes on from the first run's last one
    oldest_of_second = [s for s in history if s["metadata"]["run_id"] == second_run["run_id"]][-1]
    parent = by_id[oldest_of_second["parent_checkpoint"]["checkpoint_id"]]
    assert parent["metadata"]["run_id"] == first_run["run_id"]
    assert parent["values"] == {"seconds": 0, "done": True}
    # an update at a checkpoint of the earlier run branches from it (it was a 422)
    made = sdk.threads.update_state(napped, {"seconds": 5}, as_node="nap",
                                    checkpoint=parent["checkpoint"])
    state = sdk.threads.get_state(napped)
    assert state["checkpoint"]["checkpoint_id"] == made["checkpoint"]["checkpoint_id"]
    assert state["parent_checkpoint"]["checkpoint_id"] == parent["checkpoint"]["checkpoint_id"]
    assert state["values"] == {"seconds": 5, "done": True}
    assert len(sdk.threads.get_history(napped, limit=50)) == len(history) + 1
