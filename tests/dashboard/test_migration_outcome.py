"""Migration 0033 stores the outcome of every run that had finished: a succeeded
decomposition whose output says its plan failed is ``plan_failed`` with its reason (and its
thread, if it is the thread's latest run, in error), a failed run ``failed`` with its
error, a cancelled run ``cancelled`` saying who; an unfinished run has none."""

from __future__ import annotations

import uuid

import pytest

from dashboard.models import Run, Thread
from tests.conftest import Migrated

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]

BEFORE = [("dashboard", "0032_langgraph_run_rollback")]
AFTER = [("dashboard", "0033_outcome_stored")]


def test_finished_runs_get_the_outcome_their_end_says():
    with Migrated() as schema:
        apps = schema.at(BEFORE)
        OldRun = apps.get_model("dashboard", "Run")
        OldThread = apps.get_model("dashboard", "Thread")
        RunEvent = apps.get_model("dashboard", "RunEvent")

        def made(state: str, graph: str = "decomposition", **fields) -> uuid.UUID:
            thread = OldThread.objects.create(id=uuid.uuid4(), status=(
                "error" if state == "failed" else "idle" if state in (
                    "succeeded", "cancelled") else "interrupted"))
            return OldRun.objects.create(graph=graph, thread_id=str(thread.id),
                                         conversation=thread, state=state, **fields).id

        met = made("succeeded", output={"status": "done", "result": {}})
        plan = made("succeeded", output={"status": "failed", "reason": "task t2 failed"})
        other = made("succeeded", graph="acquisition", output={"status": "failed"})
        failed = made("failed", error_message="ValueError: boom")
        cancelled = made("cancelled", last_seq=1)
        RunEvent.objects.create(run_id=cancelled, seq=1, kind="run_cancelled",
                                payload={"by": "ann", "reason": "wrong goal"})
        waiting = made("interrupted")
        schema.at(AFTER)
        schema.at(schema.executor.loader.graph.leaf_nodes())  # read as the code now does
        found = {run.id: (run.outcome, run.outcome_reason) for run in Run.objects.all()}
        assert found[met] == ("succeeded", "")
        assert found[plan] == ("plan_failed", "task t2 failed")
        assert found[other] == ("succeeded", "")  # its graph declares no failed outcome
        assert found[failed] == ("failed", "ValueError: boom")
        assert found[cancelled] == ("cancelled", "cancelled by ann: wrong goal")
        assert found[waiting] == (None, "")
        threads = dict(Thread.objects.values_list("id", "status"))
        assert threads[Run.objects.get(id=plan).conversation_id] == "error"
        assert threads[Run.objects.get(id=met).conversation_id] == "idle"
