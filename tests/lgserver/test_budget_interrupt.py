"""A run paused at its budget, through the official ``langgraph-sdk`` as Agent Inbox uses
it: the thread shows one interrupt for the pause (in ``threads.get``, ``get_state`` and an
interrupted threads' search, and in the run's stream), never in the checkpoint; a resume
extends the budget (the run goes on and finishes) or stops the run (``budget_exceeded``),
through the services the run page and the REST API call; a bad resume is a 422 saying
what to send."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import ConflictError, PermissionDeniedError, UnprocessableEntityError

from dashboard.models import Run, RunEvent
from dashboard.runs.outcome import Outcome
from tests.conftest import api_token

# the thread's state is read through the saver and the resume decided under the thread's
# lock: both take another path on PostgreSQL
pytestmark = [pytest.mark.pg, pytest.mark.both, pytest.mark.django_db(transaction=True)]

GOAL = {"goal": "Write a briefing on solar power"}
PAUSE_AT_ONE_CALL = {"configurable": {"budget": {"max_model_calls": 1, "on_limit": "pause"}}}
# a model-call budget stops the call past it inside its node (the decomposition's worker
# records its task failed); a wall-time budget of none pauses at the run's first node
# boundary, from which an extended run goes on as if it had never stopped
PAUSE_AT_ONCE = {"configurable": {"budget": {"max_wall_minutes": 0, "on_limit": "pause"}}}


def paused(sdk, config=PAUSE_AT_ONE_CALL) -> tuple[str, Run]:
    """A thread whose decomposition run waits at its budget (of one model call)."""
    tid = sdk.threads.create()["thread_id"]
    waited = sdk.runs.wait(tid, "decomposition", input=GOAL, config=config)
    run = Run.objects.get(conversation_id=tid)
    assert run.state == Run.State.PAUSED
    [item] = waited["__interrupt__"]  # as runs.wait answers a run stopped at a question
    assert item["id"].startswith(f"planwatch-budget-{run.id}-")
    return tid, run


def only_interrupt(thread: dict) -> dict:
    """The one interrupt Agent Inbox reads from a thread (``thread.interrupts``)."""
    [items] = thread["interrupts"].values()
    [item] = items
    return item


def test_a_run_paused_at_its_budget_shows_one_interrupt_and_none_in_its_checkpoint(sdk):
    tid = sdk.threads.create()["thread_id"]
    parts = list(sdk.runs.stream(tid, "decomposition", input=GOAL, config=PAUSE_AT_ONE_CALL,
                                 stream_mode="values"))
    run = Run.objects.get(conversation_id=tid)
    pause = run.events.filter(kind=RunEvent.Kind.RUN_PAUSED).get()
    thread = sdk.threads.get(tid)
    assert thread["status"] == "interrupted"
    item = only_interrupt(thread)
    assert item["id"] == f"planwatch-budget-{run.id}-{pause.seq}"
    offered = item["value"]
    # Agent Inbox's HumanInterrupt: which budget, its limit and use, the amount to add
    assert offered["action_request"] == {"action": "budget", "args": {
        "budget": "max_model_calls", "limit": 1, "used": 1, "extend_by": 1}}
    assert offered["config"] == {"allow_ignore": True, "allow_respond": True,
                                 "allow_edit": True, "allow_accept": True}
    assert offered["description"].startswith(
        "Model calls budget of 1 reached (1 used): extend by 1 (accept), by another amount")
    assert offered["description"].endswith('or stop the run (ignore, or respond "stop").')
    assert offered["action_requests"][0]["name"] == "budget"  # Agent Chat UI's shape too

    state = sdk.threads.get_state(tid)
    assert state["interrupts"] == [item]
    assert state["tasks"][0]["interrupts"] == [item] and state["next"]
    found = sdk.threads.search(status="interrupted", metadata={"graph_id": "decomposition"},
                               limit=100)
    assert [only_interrupt(t) for t in found if t["thread_id"] == tid] == [item]
    # the run's stream ends with it, as a question's would
    values = [p.data for p in parts if p.event == "values"]
    assert values[-1] == {"__interrupt__": [item]}

    # never written into LangGraph's checkpoint: its history and the state read at that
    # checkpoint know nothing of it (a fork or replay from there neither)
    [newest] = sdk.threads.get_history(tid, limit=1)
    assert newest["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    assert newest["interrupts"] == [] and all(not t["interrupts"] for t in newest["tasks"])
    at = sdk.threads.get_state(tid, checkpoint_id=state["checkpoint"]["checkpoint_id"])
    assert at["interrupts"] == [] and all(not t["interrupts"] for t in at["tasks"])


def test_a_fork_from_where_a_run_paused_at_its_budget_knows_nothing_of_the_pause(sdk):
    tid, run = paused(sdk, PAUSE_AT_ONCE)
    at = sdk.threads.get_state(tid)["checkpoint"]["checkpoint_id"]
    forked = sdk.runs.wait(tid, "decomposition", input=None, checkpoint_id=at)
    assert "__interrupt__" not in forked and forked["status"] == "done"
    fork = Run.objects.filter(conversation_id=tid).exclude(id=run.id).get()
    assert (fork.outcome, fork.budget) == (Outcome.SUCCEEDED, None)
    run.refresh_from_db()  # the thread moved on without answering: the pause is withdrawn
    assert run.state == Run.State.CANCELLED and sdk.threads.get(tid)["interrupts"] == {}


def test_a_resume_extending_the_budget_goes_on_and_finishes(sdk):
    tid, run = paused(sdk, PAUSE_AT_ONCE)
    item = only_interrupt(sdk.threads.get(tid))
    assert item["value"]["action_request"]["args"]["budget"] == "max_wall_minutes"
    # Agent Inbox's edit of the offered action, keyed by the interrupt's id
    final = sdk.runs.wait(tid, "decomposition", command={"resume": {item["id"]: [
        {"type": "edit", "args": {"action": "budget", "args": {"extend_by": 60}}}]}})
    run.refresh_from_db()
    assert (run.status, run.outcome) == (Run.Status.SUCCEEDED, Outcome.SUCCEEDED)
    assert final["synthesis"] == run.output["synthesis"] and run.output["status"] == "done"
    assert run.model_calls > 1
    assert run.budget["max_wall_minutes"] == 60
    extended = run.events.get(kind=RunEvent.Kind.BUDGET_EXTENDED).payload
    assert extended["extend"] == {"max_wall_minutes": 60} and extended["by"] == "sdk"
    thread = sdk.threads.get(tid)
    assert thread["status"] == "idle" and thread["interrupts"] == {}
    assert Run.objects.filter(conversation_id=tid).count() == 1  # the same run went on


def test_a_resume_stopping_the_run_ends_it_budget_exceeded(sdk):
    tid, run = paused(sdk)
    sdk.runs.wait(tid, "decomposition", command={"resume": [{"type": "ignore", "args": None}]})
    run.refresh_from_db()
    assert (run.status, run.outcome) == (Run.Status.CANCELLED, Outcome.BUDGET_EXCEEDED)
    last = run.events.order_by("-seq").first()
    assert last.kind == RunEvent.Kind.RUN_CANCELLED
    assert last.payload["budget"] == {"kind": "max_model_calls", "limit": 1, "used": 1}
    thread = sdk.threads.get(tid)  # a goal not met, as a budget's stop is said everywhere
    assert thread["status"] == "error" and thread["interrupts"] == {}


def test_a_bad_resume_of_a_budget_pause_is_refused_saying_what_to_send(sdk, lg_url,
                                                                       django_user_model):
    tid, run = paused(sdk)
    item = only_interrupt(sdk.threads.get(tid))
    for resume in ("lots", [{"type": "response", "args": "more please"}],
                   [{"type": "edit", "args": {"action": "budget", "args": {"extend_by": -3}}}],
                   {"extend": "lots"}, {"stop": True, "extend": {"max_model_calls": 1}}):
        with pytest.raises(UnprocessableEntityError) as refused:
            sdk.runs.create(tid, "decomposition", command={"resume": resume})
        said = refused.value.response.json()
        assert "command.resume" in said["errors"], resume
        assert '"stop"' in said["detail"] and '{"extend": {"max_model_calls": 1}}' in (
            said["detail"]), resume
    with pytest.raises(ConflictError, match=item["id"]):  # another pause's interrupt
        sdk.runs.create(tid, "decomposition", command={"resume": {
            f"planwatch-budget-{run.id}-1": "stop"}})
    # one of the team who may answer questions but not cancel runs may not stop (nor
    # extend) a run at its budget, as on the run page and the REST API
    answerer = django_user_model.objects.create_user(username="answerer", password="pw-x-123")
    answerer.user_permissions.set(Permission.objects.filter(
        codename__in=["answer_interrupt", "view_all_threads"]))
    other = get_sync_client(url=lg_url, api_key=api_token(answerer))
    assert only_interrupt(other.threads.get(tid)) == item
    with pytest.raises(PermissionDeniedError, match=r"dashboard\.cancel_run"):
        other.runs.create(tid, "decomposition", command={"resume": "stop"})
    run.refresh_from_db()
    assert run.state == Run.State.PAUSED and sdk.threads.get(tid)["status"] == "interrupted"
    # a good one after them all is taken
    sdk.runs.wait(tid, "decomposition", command={"resume": "stop"})
    run.refresh_from_db()
    assert run.outcome == Outcome.BUDGET_EXCEEDED
