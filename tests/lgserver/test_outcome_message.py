"""A run that crashed or that a budget stopped ends its chat with a message saying so and
why, as a failed plan's does: in the thread's state, its newest history entry and its
values (Agent Chat UI reads them), and last in its stream before ``error`` or ``end``. The
message is read from the outcome stored when the run stopped; the checkpoint stays as the
run left it (a retry goes on from there)."""

from __future__ import annotations

import asyncio
import json

import pytest

from dashboard import services
from dashboard.lgserver import shapes, stream
from dashboard.models import Run, Thread
from dashboard.runs.outcome import Outcome, outcome_message
from tests.conftest import wait_run

pytestmark = [pytest.mark.django_db(transaction=True)]


def sse_parts(run_id, modes) -> list[tuple[str, object]]:
    """The run's stream as (event, data) pairs (no heartbeats), with a hang guard."""

    async def collect() -> list[bytes]:
        return [part async for part in stream.aevents(run_id, modes=modes, subgraphs=False,
                                                        after=0, keepalive=0)]

    parts = []
    for raw in asyncio.run(asyncio.wait_for(collect(), 30)):
        lines = raw.decode().splitlines()
        event = next(line[7:] for line in lines if line.startswith("event: "))
        data = "\n".join(line[6:] for line in lines if line.startswith("data: "))
        parts.append((event, json.loads(data)))
    return parts


def said_last(run: Run) -> list[dict]:
    """The transcript of the run's thread as a chat client reads it, every way it may."""
    thread = Thread.objects.get(id=run.conversation_id)
    tid = str(thread.id)
    read = shapes.thread(thread)["values"]["messages"]
    assert shapes.run_state(run, tid)["values"]["messages"] == read
    newest, *older = shapes.history(thread, limit=10)
    assert newest["values"]["messages"] == read
    # older states, and the newest read by its checkpoint id, are the graph's own
    assert all(m["id"] != read[-1]["id"] for s in older for m in s["values"].get("messages", []))
    at = newest["checkpoint"]["checkpoint_id"]
    assert shapes.run_state(run, tid, at)["values"]["messages"] == read[:-1]
    return read


def test_a_crashed_run_ends_its_chat_saying_it_failed_and_why(executor, operator):
    run = wait_run(services.run_create(graph="test.chat", input={
        "goal": "Plan a week in Porto", "fail": "the archive is down"}, user=operator).id)
    assert (run.status, run.outcome) == (Run.Status.FAILED, Outcome.FAILED)
    read = said_last(run)
    assert [m["type"] for m in read] == ["human", "ai"]
    assert read[-1]["content"] == "The run failed: RuntimeError: the archive is down."
    assert read[-1]["id"] == f"planwatch-outcome-{run.id}"

    # its stream: the state with the message, the message whole, then the error
    parts = sse_parts(run.id, ("values", "messages-tuple"))
    assert [name for name, _ in parts[-3:]] == ["values", "messages", "error"]
    assert parts[-3][1]["messages"][-1] == read[-1]
    assert parts[-2][1][0]["content"] == read[-1]["content"]
    assert parts[-1][1]["message"] == "the archive is down"


def test_a_budget_stop_ends_its_chat_naming_the_budget(executor, operator):
    run = wait_run(services.run_create(
        graph="decomposition", input={"goal": "Write a briefing on solar power"},
        user=operator, options=services.RunOptions(
            budget={"max_model_calls": 1, "on_limit": "stop"})).id)
    assert run.outcome == Outcome.BUDGET_EXCEEDED
    read = said_last(run)
    assert read[0]["type"] == "human" and read[-1]["type"] == "ai"
    assert read[-1]["content"] == f"The run was stopped by its budget: {run.outcome_reason}."
    assert "max_model_calls budget exceeded: 1 used of 1" in read[-1]["content"]
    parts = sse_parts(run.id, ("values",))
    assert [name for name, _ in parts[-2:]] == ["values", "end"]
    assert parts[-2][1]["messages"][-1]["content"] == read[-1]["content"]


@pytest.mark.parametrize("outcome", ["succeeded", "plan_failed", "cancelled", None])
def test_other_outcomes_are_told_by_their_graph_or_not_at_all(outcome):
    # a result, a failed plan's reason: the graph's own last message says it
    assert outcome_message(outcome=outcome, reason="why") == ""


def test_a_long_error_is_cut_in_the_chat():
    said = outcome_message(outcome="failed", reason="x" * 2000)
    assert said.startswith("The run failed: xxx") and len(said) < 600
