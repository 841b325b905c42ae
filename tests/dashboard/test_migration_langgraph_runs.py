"""Migration 0030 gives every run made by the code before its one LangGraph run, with the
run's own id (so every run id handed out stays valid), its events from seq 1."""

from __future__ import annotations

import uuid

import pytest

from dashboard.models import LangGraphRun, Run
from tests.conftest import Migrated

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]

BEFORE = [("dashboard", "0029_merge_one_checkpoint_thread")]
AFTER = [("dashboard", "0030_langgraph_runs")]


def _old_runs(apps) -> list[uuid.UUID]:
    """Runs as the code before wrote them: one resumed twice (its log spans the resumes),
    one waiting for an answer, one queued."""
    OldRun = apps.get_model("dashboard", "Run")
    RunEvent = apps.get_model("dashboard", "RunEvent")
    made = []
    for state, kinds in [("succeeded", ["run_started", "interrupt_raised", "run_resumed",
                                        "interrupt_raised", "run_resumed", "run_succeeded"]),
                         ("interrupted", ["run_started", "interrupt_raised"]),
                         ("queued", [])]:
        thread = uuid.uuid4()
        run = OldRun.objects.create(graph="acquisition", thread_id=str(thread), state=state,
                                    last_seq=len(kinds))
        for seq, kind in enumerate(kinds, start=1):
            RunEvent.objects.create(run=run, seq=seq, kind=kind)
        made.append(run.id)
    return made


def test_each_old_run_gets_one_langgraph_run_with_its_id():
    with Migrated() as schema:
        made = _old_runs(schema.at(BEFORE))
        schema.at(AFTER)
        schema.at(schema.executor.loader.graph.leaf_nodes())  # read as the code now does
        found = list(LangGraphRun.objects.filter(run_id__in=made).values_list(
            "id", "run_id", "first_seq", "superseded_at"))
        assert sorted(found) == sorted((run_id, run_id, 1, None) for run_id in made)
        # the columns 0030 knows (a later migration adds others)
        for run in Run.objects.filter(id__in=made).only("id", "created_at", "last_seq"):
            assert run.current_langgraph_run().created_at == run.created_at
            assert run.current_langgraph_run().last_seq() == run.last_seq
