"""How far a run may go: its recursion limit (the client's own, as LangGraph's server takes
it, or the server's default), and a checkpoint that cannot be written, which fails the run
at once, saying why."""

from __future__ import annotations

import json

import pytest
from langgraph_sdk.errors import UnprocessableEntityError

from dashboard.models import Run, RunEvent
from tests.conftest import wait_run

# Not in the PostgreSQL pass: the API's shapes and the clients' protocol take the same
# path on both databases (what differs there: test_state, test_store, test_crons,
# test_deletes, test_one_running, test_cancel_join, test_input_bounds).
pytestmark = [pytest.mark.django_db(transaction=True)]


def refusal(sdk, thread_id: str, wanted) -> str:
    """The 422's body for a run asking for ``wanted`` super-steps."""
    with pytest.raises(UnprocessableEntityError) as refused:
        sdk.runs.create(thread_id, "slow", input={"limit": 2},
                        config={"recursion_limit": wanted})
    return json.dumps(refused.value.body)


def test_a_clients_own_recursion_limit_is_taken_as_langgraphs_server_takes_it(sdk):
    thread = sdk.threads.create()
    # the official SDK's benchmark client asks for 10,000 (past the server's default)
    started = sdk.runs.create(thread["thread_id"], "slow", input={"count": 0, "limit": 3},
                              config={"recursion_limit": 10000})
    run = wait_run(started["run_id"])
    assert run.recursion_limit == 10000 and run.status == "succeeded"


def test_a_recursion_limit_that_is_not_a_whole_number_is_refused_naming_it(sdk):
    thread = sdk.threads.create()
    for wanted in (0, "many", True, 2.5, 2**31):
        why = refusal(sdk, thread["thread_id"], wanted)
        assert "config.recursion_limit" in why and "PLANWATCH_RECURSION_LIMIT" in why
    assert not Run.objects.filter(conversation_id=thread["thread_id"]).exists()


def test_the_runs_recursion_limit_stops_it_on_every_claim(sdk):
    thread = sdk.threads.create()
    # a fresh run (the executor's fast claim) stops at its limit of 4 super-steps
    first = sdk.runs.create(thread["thread_id"], "slow", input={"limit": 50},
                            config={"recursion_limit": 4})
    run = wait_run(first["run_id"])
    assert run.recursion_limit == 4
    assert run.status == "failed" and "Recursion limit of 4" in run.error_message
    # the thread's next run goes on from its checkpoint (a fork: the ORM claim)
    second = sdk.runs.create(thread["thread_id"], "slow", input={"limit": 50},
                             config={"recursion_limit": 3})
    run = wait_run(second["run_id"])
    assert run.parent_id is not None and run.recursion_limit == 3
    assert run.status == "failed" and "Recursion limit of 3" in run.error_message
    # asked for none: the server's default, far past what this run needs
    third = sdk.runs.create(thread["thread_id"], "slow", input={"count": 0, "limit": 6})
    run = wait_run(third["run_id"])
    assert run.recursion_limit is None and run.status == "succeeded"



def test_a_run_whose_checkpoint_cannot_be_written_fails_at_once_saying_why(sdk):
    thread = sdk.threads.create()
    started = sdk.runs.create(thread["thread_id"], "huge", input={"i": 0})
    run = wait_run(started["run_id"])
    assert run.status == "failed"
    assert "checkpoint" in run.error_message and "Integer exceeds 64-bit range" in \
        run.error_message, run.error_message
    # it stopped soon after the write that failed (a few steps here, 13 seen on a loaded
    # machine: the async writes trail the steps), not at the graph's end (300 steps) or at
    # the recursion limit (1000), where it stopped before
    steps = RunEvent.objects.filter(run=run, kind=RunEvent.Kind.NODE_STARTED).count()
    assert steps < 100, steps
    shown = sdk.runs.get(thread["thread_id"], started["run_id"])
    assert shown["status"] == "error"
