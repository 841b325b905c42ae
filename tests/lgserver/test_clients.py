"""What Agent Chat UI and Agent Inbox send and read, through the official ``langgraph-sdk``.

Each test replays a client's requests as LangGraph's own server answers them: a resume
with ``input: {}`` beside the command, one history per thread, messages with ids, a thread
ended with ``update_state(values=None, as_node="__end__")``, breakpoints of one run.
"""

from __future__ import annotations

import pytest

from dashboard.models import Interrupt, Run, RunEvent
from tests.conftest import wait_run

# Not in the PostgreSQL pass: the API's shapes and the clients' protocol take the same
# path on both databases (what differs there: test_state, test_store, test_crons,
# test_deletes, test_one_running, test_cancel_join, test_input_bounds).
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
    assert [p.data for p in parts if p.event == "values"][-1] == {
        "item": "lamp", "quantity": 1, "approved": "yes"}
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


def test_a_planner_takes_a_chat_clients_messages_with_the_last_human_one_as_its_goal(sdk):
    tid = sdk.threads.create()["thread_id"]
    said = [{"type": "human", "content": "Plan a picnic"},
            {"type": "ai", "content": "What for?"},
            {"type": "human", "content": [{"type": "text", "text": GOAL["goal"]}]}]
    values = sdk.runs.wait(tid, "acquisition", input={"messages": said})
    assert values["goal"] == GOAL["goal"]
    assert values["__interrupt__"][0]["value"]["field"] == "core.region"
    run = Run.objects.get(conversation_id=tid)
    # the messages open the planner's transcript, each with an id
    assert run.input["goal"] == GOAL["goal"]
    assert [m["type"] for m in run.input["messages"]] == ["human", "ai", "human"]
    assert all(m["id"] for m in run.input["messages"])
    from langgraph_sdk.errors import UnprocessableEntityError

    with pytest.raises(UnprocessableEntityError, match="no human message"):
        sdk.runs.create(None, "acquisition",
                        input={"messages": [{"type": "ai", "content": "no human here"}]})


def question_of(thread: dict) -> dict:
    """The question Agent Inbox reads from a searched thread (``thread.interrupts``)."""
    [items] = thread["interrupts"].values()
    return items[0]["value"]


def test_agent_inbox_lists_answers_and_ignores_planner_questions(sdk):
    """Agent Inbox's requests, replayed: search the interrupted threads of a graph, read
    each question, answer with response / edit / accept (and the newer decisions), and
    ignore; a declined question stops its run, it is never an answer."""
    tids = [sdk.threads.create()["thread_id"] for _ in range(4)]
    for tid in tids:
        sdk.runs.wait(tid, "acquisition", input=GOAL)
    found = sdk.threads.search(status="interrupted", metadata={"graph_id": "acquisition"},
                               limit=100, offset=0)
    listed = {t["thread_id"]: t for t in found}
    assert set(tids) <= set(listed)
    question = question_of(listed[tids[0]])
    # the older HumanInterrupt (Agent Inbox) and the newer action_requests (Agent Chat UI)
    assert question["action_request"] == {"action": "core.region", "args": {"answer": ""}}
    assert question["config"] == {"allow_ignore": True, "allow_respond": True,
                                  "allow_edit": True, "allow_accept": False}
    # short: the 249 countries are the answer's choices, not prose
    assert question["description"] == (
        "Which region should the market be sized for?\n\nAny of 249 choices; type to "
        "search them.")
    [request] = question["action_requests"]
    assert request["name"] == "core.region"
    # Agent Inbox reads arguments, Agent Chat UI args: the answer field to edit
    assert request["arguments"] == request["args"] == {"answer": ""}
    [review] = question["review_configs"]
    assert review["allowed_decisions"] == ["edit", "reject"]
    assert "Germany" in review["args_schema"]["properties"]["answer"]["examples"]
    assert question["field"] == "core.region"  # the planner's own keys stay
    state = sdk.threads.get_state(tids[0])
    assert state["tasks"][-1]["interrupts"][-1]["value"]["action_request"]["action"] == (
        "core.region")

    a, b, c, d = tids
    # response (refused by the graph as any answer is, then taken), edit, accept
    sdk.runs.wait(a, "acquisition", command={"resume": [{"type": "response",
                                                         "args": "Atlantis"}]})
    again = question_of(sdk.threads.get(a))
    assert again["field"] == "core.region" and "Atlantis" in again["description"]
    sdk.runs.wait(a, "acquisition", command={"resume": [{"type": "response",
                                                         "args": "Germany"}]})
    edited = {"action": "core.currency", "args": {"answer": "EUR"}}
    sdk.runs.wait(a, "acquisition", command={"resume": [{"type": "edit", "args": edited}]})
    accepted = {"action": "market.price", "args": {"answer": "47.88"}}
    final = sdk.runs.wait(a, "acquisition", command={"resume": [{"type": "accept",
                                                                  "args": accepted}]})
    assert {k: final["values"][k] for k in ("core.region", "core.currency")} == {
        "core.region": "Germany", "core.currency": "EUR"}
    assert final["values"]["market.price"] == 47.88
    assert sdk.threads.get(a)["status"] == "idle"
    answered = Interrupt.objects.filter(run__conversation_id=a).order_by("created_at")
    assert [i.answer for i in answered] == ["Atlantis", "Germany", "EUR", "47.88"]

    # the newer decisions: edit answers; reject (Agent Chat UI) declines
    sdk.runs.wait(b, "acquisition", command={"resume": {"decisions": [
        {"type": "edit", "edited_action": {"name": "core.region",
                                           "args": {"answer": "France"}}}]}})
    offered = question_of(sdk.threads.get(b))
    assert offered["field"] == "core.currency"
    # a suggestion is offered as the answer, which may be accepted as it is
    assert offered["action_requests"][0]["arguments"] == {"answer": "EUR"}
    assert offered["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]
    assert offered["config"]["allow_accept"] is True
    sdk.runs.wait(b, "acquisition", command={"resume": {"decisions": [{"type": "approve"}]}})
    assert sdk.threads.get_state(b)["values"]["values"]["core.currency"] == "EUR"
    sdk.runs.wait(b, "acquisition", command={"resume": {"decisions": [
        {"type": "reject", "message": "not this one"}]}})
    run_b = Run.objects.get(conversation_id=b)
    assert run_b.status == Run.Status.CANCELLED and sdk.threads.get(b)["status"] == "idle"
    reason = run_b.events.get(kind=RunEvent.Kind.RUN_CANCELLED).payload["reason"]
    assert "'market.price' was declined" in reason and "not this one" in reason

    # ignore declines too: the question is withdrawn, "ignore" is never an answer
    sdk.runs.wait(c, "acquisition", command={"resume": [{"type": "ignore", "args": None}]})
    run_c = Run.objects.get(conversation_id=c)
    assert run_c.status == Run.Status.CANCELLED
    assert list(run_c.interrupts.values_list("status", "answer")) == [
        (Interrupt.Status.CANCELLED, None)]

    # mark as resolved: update_state(values=None, as_node="__end__")
    sdk.threads.update_state(d, None, as_node="__end__")
    assert sdk.threads.get(d)["status"] == "idle"
    left = {t["thread_id"] for t in sdk.threads.search(
        status="interrupted", metadata={"graph_id": "acquisition"}, limit=100)}
    assert not left & set(tids)
    # Planwatch's own inbox and pages keep the planner's question as it asked it
    stored = Interrupt.objects.filter(run__conversation_id=a).first().payload
    assert "action_requests" not in stored and stored["field"] == "core.region"


def test_a_planner_started_from_a_chat_message_speaks_in_values_messages(sdk):
    """Agent Chat UI's reading: the transcript is ``values.messages``, the question the
    last AI message beside the interrupt; answered from the chat, the result the last."""
    tid = sdk.threads.create()["thread_id"]
    goal = {"type": "human", "content": "Estimate the TAM of a budgeting app in Germany",
            "id": "said-1"}
    modes = ["values", "messages-tuple"]
    parts = list(sdk.runs.stream(tid, "acquisition", input={"messages": [goal]},
                                 stream_mode=modes))
    shown = [p.data["messages"] for p in parts if p.event == "values" and "messages" in p.data]
    asked = next(p.data["__interrupt__"] for p in parts if p.event == "values"
                 and "__interrupt__" in p.data)
    assert [(m["type"], m["id"]) for m in shown[0]] == [("human", "said-1")]
    assert [m["type"] for m in shown[-1]] == ["human", "ai"]
    assert shown[-1][1]["content"].startswith("Which region should the market be sized for?")
    assert asked[0]["value"]["action_requests"][0]["arguments"] == {"answer": "Germany"}
    streamed = [p.data[0] for p in parts if p.event == "messages"]
    assert [m["id"] for m in streamed] == [shown[-1][1]["id"]]  # the one the state keeps

    accept = {"decisions": [{"type": "approve"}]}  # the region, then the currency offered
    for resume in (accept, accept, {"decisions": [{"type": "edit", "edited_action": {
            "name": "market.price", "args": {"answer": "47.88"}}}]}):
        sdk.runs.wait(tid, "acquisition", input={}, command={"resume": resume})
    messages = sdk.threads.get_state(tid)["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai"] * 4
    assert [m["content"] for m in messages[2:7:2]] == ["Germany", "EUR", "47.88"]
    assert all(m["id"] for m in messages) and len({m["id"] for m in messages}) == 8
    final = messages[-1]["content"]
    assert final.startswith("TAM ") and " EUR a year." in final
    assert "TAM = population \u00d7 adoption rate \u00d7 yearly price = " in final


def test_command_goto_end_resolves_a_waiting_thread_with_its_update(sdk):
    """Agent Chat UI's "Mark as Resolved": ``command: {goto: "__end__"}``."""
    from langgraph_sdk.errors import UnprocessableEntityError

    tid = sdk.threads.create()["thread_id"]
    sdk.runs.wait(tid, "acquisition", input=GOAL)
    with pytest.raises(UnprocessableEntityError, match="goto '__end__'"):
        sdk.runs.create(tid, "acquisition", command={"goto": "tick"})
    sdk.runs.wait(tid, "acquisition", command={"goto": "__end__", "update": {"max_iters": 7}})
    assert sdk.threads.get(tid)["status"] == "idle"
    state = sdk.threads.get_state(tid)
    assert state["values"]["max_iters"] == 7 and state["next"] == []
    run = Run.objects.get(conversation_id=tid)
    assert run.status == Run.Status.CANCELLED
    assert list(run.interrupts.values_list("status", flat=True)) == [
        Interrupt.Status.CANCELLED]


def test_command_update_beside_a_resume_is_applied_before_the_node_goes_on(sdk):
    """``Command(resume=…, update=…)``: as LangGraph's server runs it, the update is in the
    state before the interrupted node resumes, and the answer is taken."""
    tid = asked(sdk)
    final = sdk.runs.wait(tid, "orders", command={"resume": "yes", "update": {"quantity": 5}})
    assert final == {"item": "lamp", "quantity": 5, "approved": "yes"}
    assert sdk.threads.get(tid)["status"] == "idle"
    [run] = Run.objects.filter(conversation_id=tid)  # the same run went on
    # each checkpoint names its LangGraph run (the start, then the resume) and graph in its
    # metadata, as on LangGraph's server
    history = sdk.threads.get_history(tid)
    started, resumed = sorted(run.langgraph_run_ids(), key=lambda i: i != str(run.id))
    assert {(h["metadata"]["run_id"], h["metadata"]["graph_id"]) for h in history} == {
        (started, "orders"), (resumed, "orders")}


def test_a_resume_whose_answer_is_refused_writes_none_of_its_update(sdk):
    """The update is written under the thread's lock once the answer is recorded: an
    answer refused (here, too long) leaves the waiting thread as it was."""
    from langgraph_sdk.errors import APIStatusError

    tid = asked(sdk)
    with pytest.raises(APIStatusError, match="the limit is"):
        sdk.runs.create(tid, "orders", command={"resume": "x" * 70_000,
                                                "update": {"quantity": 5}})
    assert sdk.threads.get(tid)["status"] == "interrupted"
    assert sdk.threads.get_state(tid)["values"] == {"item": "lamp", "quantity": 1}


def test_command_update_alone_updates_a_waiting_thread_which_keeps_waiting(sdk):
    from langgraph_sdk.errors import UnprocessableEntityError

    tid = asked(sdk)
    run = sdk.runs.create(tid, "orders", command={"update": {"item": "desk"}})
    assert run["status"] == "interrupted"
    assert sdk.threads.get(tid)["status"] == "interrupted"
    assert sdk.threads.get_state(tid)["values"]["item"] == "desk"
    with pytest.raises(UnprocessableEntityError, match="no channel 'colour'"):
        sdk.runs.create(tid, "orders", command={"update": {"colour": "red"}})
    final = sdk.runs.wait(tid, "orders", command={"resume": "ok"})
    assert final == {"item": "desk", "quantity": 1, "approved": "ok"}
    # on an ended thread nothing is left to run: the update is written to its state
    sdk.runs.wait(tid, "orders", command={"update": {"quantity": 3}})
    assert sdk.threads.get_state(tid)["values"] == {"item": "desk", "quantity": 3,
                                                    "approved": "ok"}
    assert sdk.threads.get(tid)["status"] == "idle"
