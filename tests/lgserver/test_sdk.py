"""Planwatch driven by the official ``langgraph-sdk`` through LangGraph's server API.

Every run the SDK starts is a Planwatch run: the same event log (gapless), interrupts,
audit names and trace page as a run started from the pages; a page's run is a thread the
SDK can read.
"""

from __future__ import annotations

import itertools
import uuid

import pytest
from django.test import Client
from langgraph_sdk.errors import (
    AuthenticationError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    UnprocessableEntityError,
)

from dashboard import services
from dashboard.models import Interrupt, LangGraphRun, Run, RunEvent, Thread
from tests.conftest import api_token, assert_gapless, wait_run

# Not in the PostgreSQL pass: the API's shapes and the clients' protocol take the same
# path on both databases (what differs there: test_state, test_store, test_crons,
# test_deletes, test_one_running, test_cancel_join, test_input_bounds).
pytestmark = [pytest.mark.django_db(transaction=True)]

GOAL = {"goal": "Estimate the TAM of a budgeting app"}


def planwatch_run(run_id: str) -> Run:
    """The Planwatch run a LangGraph run (its start, a resume or a continue) is a part of."""
    return LangGraphRun.objects.get(id=run_id).run


def trace_page(run: Run, user) -> str:
    """The run's trace page, as an operator sees it."""
    web = Client()
    web.force_login(user)
    response = web.get(f"/runs/{run.id}/")
    assert response.status_code == 200
    return response.content.decode()


def test_assistants_one_per_graph_with_the_start_forms_schema(sdk):
    found = {a["assistant_id"]: a for a in sdk.assistants.search(limit=50)}
    assert {"acquisition", "decomposition", "orders", "slow", "chat", "nested"} <= set(found)
    assert "broken" not in found  # listed with its error on the runs page and by check
    assert found["orders"]["graph_id"] == "orders"
    schema = sdk.assistants.get_schemas("acquisition")["input_schema"]
    assert set(schema["properties"]) == {"goal", "profile", "region", "currency", "max_iters"}
    assert schema["additionalProperties"] is False
    assert "Germany" in schema["properties"]["region"]["enum"]
    orders = sdk.assistants.get_schemas("orders")["input_schema"]
    assert set(orders["properties"]) == {"item", "quantity", "approved"}
    drawing = sdk.assistants.get_graph("orders")
    assert {n["id"] for n in drawing["nodes"]} >= {"price", "approve"}
    with pytest.raises(NotFoundError, match="unknown graph 'nope'"):
        sdk.assistants.get("nope")


def test_anonymous_and_unpermitted_clients_are_refused(lg_url, viewer):
    from langgraph_sdk import get_sync_client

    with pytest.raises(AuthenticationError):
        get_sync_client(url=lg_url, api_key=None).assistants.search()
    with pytest.raises(AuthenticationError):
        get_sync_client(url=lg_url, api_key="not-a-token").threads.search()
    looker = get_sync_client(url=lg_url, api_key=api_token(viewer))
    assert looker.assistants.search()  # reading is every signed-in user's
    with pytest.raises(PermissionDeniedError, match=r"dashboard\.start_run"):
        looker.threads.create()


def test_acquisition_streamed_to_its_question_resumed_twice_and_joined(sdk, sdk_user):
    thread = sdk.threads.create(metadata={"team": "pricing"})
    parts = list(sdk.runs.stream(thread["thread_id"], "acquisition", input=GOAL,
                                 stream_mode=["values", "updates"]))
    assert parts[0].event == "metadata"
    run_id = parts[0].data["run_id"]
    asked = [p.data["__interrupt__"][0] for p in parts
             if p.event == "updates" and "__interrupt__" in p.data]
    assert [a["value"]["field"] for a in asked] == ["core.region"]
    assert any(p.event == "values" and p.data.get("goal") == GOAL["goal"] for p in parts)

    state = sdk.threads.get_state(thread["thread_id"])
    assert state["next"] == ["ask_user"]
    assert state["interrupts"][0]["id"] == asked[0]["id"]
    history = sdk.threads.get_history(thread["thread_id"], limit=50)
    assert len(history) >= 3
    assert history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    shown = sdk.threads.get(thread["thread_id"])
    assert shown["status"] == "interrupted" and shown["metadata"]["team"] == "pricing"

    # a plain resume value, then a map by interrupt id, then the price
    # a resume is a LangGraph run of its own that goes on in the same Planwatch run
    resumed = sdk.runs.create(thread["thread_id"], "acquisition",
                              command={"resume": "Germany"})
    assert resumed["run_id"] != run_id
    assert planwatch_run(resumed["run_id"]) == planwatch_run(run_id)
    values = sdk.runs.join(thread["thread_id"], resumed["run_id"])
    question = values["__interrupt__"][0]
    assert question["value"]["field"] == "core.currency"
    resumed = sdk.runs.create(thread["thread_id"], "acquisition",
                              command={"resume": {question["id"]: "EUR"}})
    values = sdk.runs.join(thread["thread_id"], resumed["run_id"])
    assert values["__interrupt__"][0]["value"]["field"] == "market.price"
    resumed = sdk.runs.create(thread["thread_id"], "acquisition", command={"resume": "47.88"})
    final = sdk.runs.join(thread["thread_id"], resumed["run_id"])
    assert "__interrupt__" not in final
    assert final["values"]["core.region"] == "Germany"
    assert final["values"]["market.tam"] == pytest.approx(84_500_000 * 0.18 * 47.88)
    assert sdk.runs.get(thread["thread_id"], resumed["run_id"])["status"] == "success"
    assert sdk.runs.get(thread["thread_id"], run_id)["status"] == "interrupted"
    assert sdk.threads.get(thread["thread_id"])["status"] == "idle"

    run = planwatch_run(run_id)
    assert run.status == Run.Status.SUCCEEDED and str(run.conversation_id) == thread["thread_id"]
    assert run.created_by_name == "sdk"
    events = assert_gapless(run)
    assert [e.kind for e in events].count(RunEvent.Kind.INTERRUPT_ANSWERED) == 3
    assert set(run.interrupts.values_list("answered_by_name", flat=True)) == {"sdk"}
    assert "Succeeded" in trace_page(run, sdk_user)


def test_input_is_validated_like_the_start_form_with_a_422_naming_the_field(sdk):
    thread = sdk.threads.create()
    with pytest.raises(UnprocessableEntityError, match="region"):
        sdk.runs.create(thread["thread_id"], "acquisition",
                        input={**GOAL, "region": "Atlantis"})
    with pytest.raises(UnprocessableEntityError, match="unknown input field"):
        sdk.runs.create(thread["thread_id"], "acquisition", input={**GOAL, "status": "x"})
    assert not Run.objects.filter(conversation_id=thread["thread_id"]).exists()
    # {"goal": …} alone starts an acquisition run (LangGraph's own server dies on it)
    run = sdk.runs.create(thread["thread_id"], "acquisition", input=GOAL)
    assert wait_run(run["run_id"]).status == Run.Status.INTERRUPTED


def test_decomposition_streams_with_subgraphs_and_a_subgraph_names_its_namespace(sdk):
    thread = sdk.threads.create()
    names = [p.event for p in sdk.runs.stream(
        thread["thread_id"], "decomposition",
        input={"goal": "Plan a neighbourhood street party"},
        stream_mode=["updates", "tasks"], stream_subgraphs=True)]
    assert {"metadata", "updates", "tasks"} <= set(names)  # its workers are Sends, not
    # subgraphs: nothing namespaced; a graph with a subgraph names each part `mode|ns`
    parts = list(sdk.runs.stream(None, "nested", input={"count": 1},
                                 stream_mode=["custom", "updates"], stream_subgraphs=True))
    inner = [p for p in parts if p.event.startswith("custom|child:")]
    assert [p.data for p in inner] == [{"inner": 1}]
    assert any(p.event.startswith("updates|child:") for p in parts)
    assert {"child": {"count": 11}} in [p.data for p in parts if p.event == "updates"]
    flat = list(sdk.runs.stream(None, "nested", input={"count": 1}, stream_mode="updates"))
    assert [p.event for p in flat] == ["metadata", "updates", "end"]  # without: the root only


def test_a_langgraph_json_graph_streams_custom_events_and_takes_its_answer(sdk, sdk_user):
    parts = list(sdk.runs.stream(None, "orders", input={"item": "lamp", "quantity": 3},
                                 config={"configurable": {"shop": "east"}},
                                 stream_mode=["custom", "values", "updates"],
                                 on_completion="keep"))
    run_id = parts[0].data["run_id"]
    # the client's configurable values reach the graph
    assert {"progress": "pricing lamp at east"} in [p.data for p in parts
                                                     if p.event == "custom"]
    with pytest.raises(UnprocessableEntityError, match="thread_id are Planwatch's"):
        sdk.runs.create(None, "orders", input={"item": "x"},
                        config={"configurable": {"thread_id": "mine"}})
    question = next(p.data["__interrupt__"][0] for p in parts
                if p.event == "updates" and "__interrupt__" in p.data)
    assert question["value"] == {"question": "Approve 3 x lamp?"}
    run = planwatch_run(run_id)
    thread_id = str(run.conversation_id)  # a stateless run's thread, kept as asked
    pending = Interrupt.objects.get(run=run)
    assert pending.status == Interrupt.Status.PENDING  # in the inbox like any question
    final = sdk.runs.wait(thread_id, "orders", command={"resume": "yes"})
    assert final == {"item": "lamp", "quantity": 3, "approved": "yes"}
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and run.output is not None
    kinds = [e.kind for e in assert_gapless(run)]
    assert RunEvent.Kind.CUSTOM in kinds and RunEvent.Kind.INTERRUPT_ANSWERED in kinds
    assert "Succeeded" in trace_page(run, sdk_user)


def test_a_chat_graph_streams_whole_messages_as_messages_tuple(sdk):
    thread = sdk.threads.create()
    parts = list(sdk.runs.stream(
        thread["thread_id"], "chat", input={"messages": [{"role": "user", "content": "hi"}]},
        stream_mode=["messages-tuple", "values"]))
    said = [p.data[0]["content"] for p in parts if p.event == "messages"]
    assert said == ["You said: hi"]
    assert parts[-2].event == "values" and "__interrupt__" in parts[-2].data
    assert parts[-1].event == "end" and parts[-1].data["status"] == "interrupted"
    # the next message on the same thread goes on from its state
    sdk.runs.wait(thread["thread_id"], "chat", command={"resume": True})
    state = sdk.threads.get_state(thread["thread_id"])
    assert [m["content"] for m in state["values"]["messages"]][-1] == "Sent."


def test_cancel_and_the_multitask_strategies(sdk):
    thread = sdk.threads.create()
    first = sdk.runs.create(thread["thread_id"], "slow", input={"limit": 400})
    wait_run(first["run_id"], statuses=("running",))
    with pytest.raises(ConflictError, match="busy"):
        sdk.runs.create(thread["thread_id"], "slow", input={"limit": 2},
                        multitask_strategy="reject")
    assert sdk.threads.get(thread["thread_id"])["status"] == "busy"
    # none named: enqueued, as on LangGraph's server; cancelled here to go on
    queued = sdk.runs.create(thread["thread_id"], "slow", input={"limit": 2})
    assert queued["status"] == "pending" and queued["multitask_strategy"] == "enqueue"
    sdk.runs.cancel(thread["thread_id"], queued["run_id"])
    assert wait_run(queued["run_id"]).status == Run.Status.CANCELLED
    second = sdk.runs.create(thread["thread_id"], "slow", input={"limit": 2},
                             multitask_strategy="interrupt")
    assert wait_run(first["run_id"]).status == Run.Status.CANCELLED
    assert wait_run(second["run_id"]).status == Run.Status.SUCCEEDED
    third = sdk.runs.create(thread["thread_id"], "slow", input={"count": 0, "limit": 400})
    wait_run(third["run_id"], statuses=("running",))
    sdk.runs.cancel(thread["thread_id"], third["run_id"])
    assert wait_run(third["run_id"]).status == Run.Status.CANCELLED
    assert sdk.runs.get(thread["thread_id"], third["run_id"])["status"] == "interrupted"
    listed = [r["run_id"] for r in sdk.runs.list(thread["thread_id"])]
    assert listed == [third["run_id"], second["run_id"], queued["run_id"], first["run_id"]]


def test_join_stream_resumes_after_the_last_event_id(sdk):
    thread = sdk.threads.create()
    run = sdk.runs.create(thread["thread_id"], "slow", input={"limit": 30})
    seen = []
    for part in sdk.runs.join_stream(thread["thread_id"], run["run_id"], last_event_id="0",
                                     stream_mode=["updates"]):
        if part.event == "updates":
            seen.append(part)
        if len(seen) == 5:
            break
    resume_after = seen[-1].id
    rest = [p for p in sdk.runs.join_stream(thread["thread_id"], run["run_id"],
                                            last_event_id=resume_after,
                                            stream_mode=["updates"])
            if p.event == "updates"]
    counts = [p.data["tick"]["count"] for p in seen + rest]
    assert counts == list(range(1, 31))  # each update once, in order, none lost


def finish(sdk, tid: str, values: dict) -> tuple[dict, int]:
    """Continue past each breakpoint and answer the price until the thread's run ends;
    the final values and how many breakpoints it passed."""
    pauses = 0
    while True:
        run = planwatch_run(sdk.runs.list(tid, limit=1)[0]["run_id"])
        if run.status == Run.Status.SUCCEEDED:
            return values, pauses
        assert run.status in (Run.Status.PAUSED, Run.Status.INTERRUPTED), run.status
        if run.status == Run.Status.PAUSED:
            assert sdk.threads.get_state(tid)["next"] == ["decide"]
            pauses += 1
            # continue; breakpoints belong to the run that asks for them: ask again
            values = sdk.runs.wait(tid, "acquisition", input=None, interrupt_before=["decide"])
        else:
            values = sdk.runs.wait(tid, "acquisition", command={"resume": "47.88"},
                                   interrupt_before=["decide"])


def test_breakpoints_edit_and_a_run_from_a_past_checkpoint(sdk):
    tid = sdk.threads.create()["thread_id"]
    inputs = {**GOAL, "region": "Germany", "currency": "EUR"}
    first = sdk.runs.wait(tid, "acquisition", input=inputs, interrupt_before=["decide"])
    assert "__interrupt__" not in first
    assert sdk.threads.get_state(tid)["next"] == ["decide"]
    assert sdk.threads.get(tid)["status"] == "interrupted"
    final, pauses = finish(sdk, tid, first)
    assert pauses >= 2
    tam = final["values"]["market.tam"]
    parent = planwatch_run(sdk.runs.list(tid, limit=1)[0]["run_id"])

    before_calculate = next(s for s in sdk.threads.get_history(tid, limit=200)
                            if s["next"] == ["calculate"])
    with pytest.raises(UnprocessableEntityError, match="no checkpoint 'nope'"):
        sdk.runs.create(tid, "acquisition", checkpoint_id="nope")
    replayed = sdk.runs.wait(tid, "acquisition",
                             checkpoint_id=before_calculate["checkpoint"]["checkpoint_id"])
    assert replayed["values"]["market.tam"] == tam  # from there again: the same result
    fork = planwatch_run(sdk.runs.list(tid, limit=1)[0]["run_id"])
    assert fork.parent_id == parent.id and fork.conversation_id == parent.conversation_id
    assert fork.forked_from_checkpoint == before_calculate["checkpoint"]["checkpoint_id"]

    # edit the price as of the checkpoint before calculate: the next run's TAM follows
    history = sdk.threads.get_history(tid, limit=300)
    again = next(s for s in history if s["next"] == ["calculate"])
    with pytest.raises(UnprocessableEntityError, match="no_such_channel"):
        sdk.threads.update_state(tid, {"no_such_channel": 1}, as_node="tick",
                                 checkpoint_id=again["checkpoint"]["checkpoint_id"])
    assert len(sdk.threads.get_history(tid, limit=300)) == len(history)  # nothing written
    edited_values = {**again["values"]["values"], "market.price": 47.88 * 2}
    sdk.threads.update_state(tid, {"values": edited_values}, as_node="tick",
                             checkpoint_id=again["checkpoint"]["checkpoint_id"])
    doubled = sdk.runs.wait(tid, "acquisition", input=None)
    assert doubled["values"]["market.tam"] == pytest.approx(tam * 2)
    assert doubled["sources"]["market.price"] == "edited"  # the graph's record of it
    edit = RunEvent.objects.get(run=fork, kind=RunEvent.Kind.CHECKPOINT,
                                payload__source="update")
    assert edit.payload["by"] == "sdk" and edit.payload["as_node"] == "tick"
    assert edit.payload["values"] == {"values": edited_values}


def test_a_run_started_from_the_pages_is_a_thread_with_its_run_and_state(sdk, sdk_user, executor):
    run = services.run_create(graph="acquisition", input=GOAL, user=sdk_user)
    wait_run(run.id)
    thread = sdk.threads.get(str(run.id))  # its thread has the run's id
    assert thread["status"] == "interrupted"
    assert [r["run_id"] for r in sdk.runs.list(str(run.id))] == [str(run.id)]
    assert sdk.threads.get_state(str(run.id))["next"] == ["ask_user"]
    found = sdk.threads.search(metadata={"graph_id": "acquisition"}, limit=100)
    assert str(run.id) in [t["thread_id"] for t in found]
    assert Thread.objects.get(id=run.id).created_by_name == "sdk"


def test_unknown_ids_and_unserved_endpoints_say_so(sdk):
    with pytest.raises(NotFoundError, match="not found"):
        sdk.threads.get(str(uuid.uuid4()))
    with pytest.raises(NotFoundError, match="not found"):
        sdk.threads.get("not-a-uuid")
    with pytest.raises(NotFoundError, match="not served by Planwatch"):
        sdk.http.get("/a2a/nowhere")
    thread = sdk.threads.create()
    with pytest.raises(UnprocessableEntityError, match="command"):
        sdk.runs.create(thread["thread_id"], "orders", command={"goto": "approve"})
    with pytest.raises(ConflictError, match="not waiting for an answer"):
        sdk.runs.create(thread["thread_id"], "orders", command={"resume": "yes"})
    assert not Run.objects.filter(conversation_id=thread["thread_id"]).exists()


def test_enqueued_runs_wait_their_turn_and_go_on_from_the_state_before_them(sdk):
    thread = sdk.threads.create()
    tid = thread["thread_id"]
    first = sdk.runs.create(tid, "slow", input={"limit": 15})
    second = sdk.runs.create(tid, "slow", input={"limit": 20}, multitask_strategy="enqueue")
    third = sdk.runs.create(tid, "slow", input={"limit": 25}, multitask_strategy="enqueue")
    assert sdk.runs.get(tid, second["run_id"])["status"] == "pending"
    assert sdk.threads.get(tid)["status"] == "busy"
    final = sdk.runs.join(tid, third["run_id"])
    assert final == {"count": 25, "limit": 25}  # 15, then on to 20, then on to 25
    runs = [wait_run(r["run_id"], statuses=("succeeded",)) for r in (first, second, third)]
    assert runs[1].waits_for_id == runs[0].id and runs[2].waits_for_id == runs[1].id
    for before, after in itertools.pairwise(runs):
        assert after.started_at >= before.finished_at  # one after the other
        assert after.parent_id == before.id and after.forked_from_checkpoint
    assert sdk.threads.get(tid)["status"] == "idle"


def test_thread_search_sorts_by_langgraphs_keys_and_refuses_others_naming_them(sdk):
    tag = uuid.uuid4().hex
    made = [sdk.threads.create(metadata={"tag": tag})["thread_id"] for _ in range(3)]

    def found(**sort):
        return [t["thread_id"] for t in sdk.threads.search(metadata={"tag": tag}, **sort)]

    assert found() == found(sort_by="created_at", sort_order="desc") == made[::-1]
    assert found(sort_by="created_at", sort_order="asc") == made
    assert found(sort_by="thread_id", sort_order="asc") == sorted(made)
    assert found(sort_by="thread_id", sort_order="desc") == sorted(made, reverse=True)
    assert sorted(found(sort_by="status")) == sorted(made)
    with pytest.raises(UnprocessableEntityError, match=r"sort_by.*'colour'.*thread_id"):
        sdk.threads.search(sort_by="colour")

    with pytest.raises(UnprocessableEntityError, match=r"sort_order.*'upwards'"):
        sdk.threads.search(sort_order="upwards")


def test_thread_search_reads_aegras_order_by_unless_sort_by_is_sent(sdk):
    tag = uuid.uuid4().hex
    made = [sdk.threads.create(metadata={"tag": tag})["thread_id"] for _ in range(3)]

    def ordered(order_by: object, **sort) -> list[str]:  # the SDK has no order_by: its http
        found = sdk.http.post("/threads/search", json={
            "metadata": {"tag": tag}, "order_by": order_by, **sort})
        return [t["thread_id"] for t in found]

    assert ordered("created_at ASC") == ordered("created_at asc") == made
    assert ordered("created_at DESC") == ordered("created_at") == made[::-1]
    assert ordered("thread_id ASC") == sorted(made)
    assert ordered("created_at ASC", sort_by="created_at") == made[::-1]  # sort_by wins
    # one naming no sort key is ignored, as LangGraph's server ignores the field
    for ignored in ("colour ASC", "password; DROP TABLE threads", "", None):
        assert ordered(ignored) == made[::-1]
    with pytest.raises(UnprocessableEntityError, match="order_by"):
        ordered({"created_at": "asc"})  # not text at all: its shape refuses it
