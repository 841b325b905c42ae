"""What Agent Chat UI and Agent Inbox send and read, through the official ``langgraph-sdk``.

Each test replays a client's requests as LangGraph's own server answers them: a resume
with ``input: {}`` beside the command, one history per thread, messages with ids, a thread
ended with ``update_state(values=None, as_node="__end__")``, breakpoints of one run.
"""

from __future__ import annotations

import pytest

from dashboard.models import Interrupt, Run, RunEvent
from tests.conftest import wait_run

pytestmark = [pytest.mark.django_db(transaction=True)]

HI = {"messages": [{"type": "human", "content": "hi"}]}


def asked(sdk, item: str = "lamp") -> str:
    """A thread of the ``orders`` graph waiting for its approval."""
    tid = sdk.threads.create()["thread_id"]
    sdk.runs.wait(tid, "orders", input={"item": item})
    assert sdk.threads.get(tid)["status"] == "interrupted"
    return tid


def test_input_beside_a_command_is_taken_and_the_command_wins(sdk):
    tid = asked(sdk)  # Agent Chat UI's Approve: runs/stream with input {} and the resume
    parts = list(sdk.runs.stream(tid, "orders", input={}, command={"resume": "yes"},
                                 stream_mode="values"))
    assert parts[-1].data == {"item": "lamp", "quantity": 1, "approved": "yes"}
    tid = asked(sdk)
    final = sdk.runs.wait(tid, "orders", input={"item": "ignored"},
                          command={"resume": "edited"})
    assert final == {"item": "lamp", "quantity": 1, "approved": "edited"}
    tid = asked(sdk)
    run = sdk.runs.create(tid, "orders", input={}, command={"resume": "later"})
    assert sdk.runs.join(tid, run["run_id"])["approved"] == "later"
    assert Run.objects.filter(conversation_id=tid).count() == 1  # the same run went on


def test_a_threads_history_is_one_chain_across_its_runs(sdk):
    tid = sdk.threads.create()["thread_id"]
    for text in ("hi", "again", "and again"):
        sdk.runs.wait(tid, "chat", input={"messages": [{"type": "human", "content": text}]})
        sdk.runs.wait(tid, "chat", command={"resume": True})
    assert Run.objects.filter(conversation_id=tid).count() == 3
    history = sdk.threads.get_history(tid, limit=100)
    ids = [s["checkpoint"]["checkpoint_id"] for s in history]
    assert len(set(ids)) == len(ids)
    parents = [(s["parent_checkpoint"] or {}).get("checkpoint_id") for s in history]
    assert parents == [*ids[1:], None]  # newest first, each the child of the next
    assert "fork" not in [s["metadata"].get("source") for s in history]
    assert [m["content"] for m in history[0]["values"]["messages"]] == [
        "hi", "You said: hi", "Sent.", "again", "You said: again", "Sent.",
        "and again", "You said: and again", "Sent."]
    state = sdk.threads.get_state(tid)
    assert state["checkpoint"]["checkpoint_id"] == ids[0]
    assert state["parent_checkpoint"]["checkpoint_id"] == ids[1]


def test_every_streamed_message_has_the_id_the_state_keeps_also_on_a_resume(sdk):
    tid = sdk.threads.create()["thread_id"]
    first = [p.data[0] for p in sdk.runs.stream(tid, "chat", input=HI,
                                                 stream_mode="messages-tuple")
             if p.event == "messages"]
    resumed = [p.data[0] for p in sdk.runs.stream(tid, "chat", command={"resume": True},
                                                   stream_mode=["messages-tuple", "messages"])
               if p.event in ("messages", "messages/complete")]
    streamed = first + resumed
    assert [m["content"] for m in streamed] == ["You said: hi", "Sent.", "Sent."]
    assert all(m["id"] for m in streamed)
    kept = {m["content"]: m["id"] for m in sdk.threads.get_state(tid)["values"]["messages"]}
    assert {m["content"]: m["id"] for m in streamed} == {
        "You said: hi": kept["You said: hi"], "Sent.": kept["Sent."]}


def test_update_state_with_no_values_as_end_closes_the_thread_and_stops_its_run(sdk):
    tid = asked(sdk)
    run = Run.objects.get(conversation_id=tid)
    sdk.threads.update_state(tid, None, as_node="__end__")  # Agent Inbox's "resolve"
    state = sdk.threads.get_state(tid)
    assert state["next"] == [] and state["interrupts"] == []
    assert state["values"] == {"item": "lamp", "quantity": 1}
    assert sdk.threads.get(tid)["status"] == "idle"
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert Interrupt.objects.get(run=run).status == Interrupt.Status.CANCELLED
    stopped = run.events.get(kind=RunEvent.Kind.RUN_CANCELLED)
    assert stopped.payload["by"] == "sdk" and "__end__" in stopped.payload["reason"]
    ended = run.events.get(kind=RunEvent.Kind.CHECKPOINT, payload__source="update")
    assert ended.payload["as_node"] == "__end__" and ended.payload["values"] is None


def test_update_state_with_no_values_names_an_unknown_node(sdk):
    from langgraph_sdk.errors import UnprocessableEntityError

    tid = asked(sdk)
    with pytest.raises(UnprocessableEntityError, match="no node 'nowhere'"):
        sdk.threads.update_state(tid, None, as_node="nowhere")
    assert sdk.threads.get(tid)["status"] == "interrupted"


GOAL = {"goal": "Estimate the TAM of a budgeting app"}


def test_breakpoints_apply_only_to_the_run_that_asked_for_them(sdk):
    tid = sdk.threads.create()["thread_id"]
    sdk.runs.wait(tid, "acquisition", input={**GOAL, "region": "Germany", "currency": "EUR"},
                  interrupt_before=["decide"])
    assert sdk.threads.get_state(tid)["next"] == ["decide"]
    # a continue that asks for no breakpoint runs on to the question, past every decide
    values = sdk.runs.wait(tid, "acquisition", input=None)
    assert values["__interrupt__"][0]["value"]["field"] == "market.price"
    # and a resume is a run of its own too: the breakpoint it asks for stops it
    sdk.runs.wait(tid, "acquisition", command={"resume": "47.88"},
                  interrupt_before=["finish"])
    assert sdk.threads.get_state(tid)["next"] == ["finish"]
    final = sdk.runs.wait(tid, "acquisition", input=None)
    assert final["values"]["market.price"] == 47.88
    run = Run.objects.get(conversation_id=tid)
    assert wait_run(run.id).status == Run.Status.SUCCEEDED
    changes = [e.payload for e in run.events.filter(kind=RunEvent.Kind.BREAKPOINTS_CHANGED)]
    assert [(c["before"], c["after"]) for c in changes] == [
        ([], []), (["finish"], []), ([], [])]
