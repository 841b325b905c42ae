"""Deleting threads and runs through ``/langgraph/`` removes their LangGraph checkpoints
too, and leaves the thread's status to its latest remaining run."""

from __future__ import annotations

import pytest

from dashboard.checkpoints import checkpoint_list
from dashboard.models import Run, Thread
from dashboard.models_checkpoints import Checkpoint
from tests.conftest import wait_run

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


def checkpoints_of(thread_id: str, run_id: str) -> int:
    """How many root checkpoints of the thread's checkpoint thread name the run."""
    return len(checkpoint_list(thread_id=thread_id, run_ids=[run_id], limit=1000))


def test_deleting_a_run_removes_its_checkpoints_and_its_status(sdk):
    thread = sdk.threads.create()
    tid = thread["thread_id"]
    first = sdk.runs.create(tid, "slow", input={"limit": 2})
    assert wait_run(first["run_id"]).status == "succeeded"
    second = sdk.runs.create(tid, "slow", input={"limit": 50}, config={"recursion_limit": 2})
    assert wait_run(second["run_id"]).status == "failed"
    assert sdk.threads.get(tid)["status"] == "error"
    assert Run.objects.get(id=second["run_id"]).thread_id == tid  # the thread's one
    assert checkpoints_of(tid, second["run_id"]) > 0
    kept = checkpoints_of(tid, first["run_id"])
    sdk.runs.delete(tid, second["run_id"])
    assert checkpoints_of(tid, second["run_id"]) == 0
    assert checkpoints_of(tid, first["run_id"]) == kept > 0  # the thread's other run's stay
    assert sdk.threads.get_state(tid)["values"] == {"count": 2, "limit": 2}  # as before it
    assert sdk.threads.get(tid)["status"] == "idle"  # the first run's, again
    assert [t["status"] for t in sdk.threads.search(ids=[tid])] == ["idle"]


def test_deleting_a_thread_removes_every_runs_checkpoints(sdk):
    thread = sdk.threads.create()
    tid = thread["thread_id"]
    for limit in (2, 4):
        run = sdk.runs.create(tid, "slow", input={"limit": limit})
        assert wait_run(run["run_id"]).status == "succeeded"
    held = list(Run.objects.filter(conversation_id=tid).values_list("thread_id", flat=True))
    assert Checkpoint.objects.filter(thread_id__in=held).count() > 0
    sdk.threads.delete(tid)
    assert not Thread.objects.filter(id=tid).exists()
    assert not Checkpoint.objects.filter(thread_id__in=held).exists()
