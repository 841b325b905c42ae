"""Migration 0032 tells each LangGraph run made before where its ``Run`` waited when it
went on (what a rollback of it returns the ``Run`` to): paused for a continue (its first
event is the operator's ``run_continued``), interrupted for a resume, blank for a first."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from dashboard.models import LangGraphRun
from tests.conftest import Migrated

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]

BEFORE = [("dashboard", "0030_langgraph_runs")]
AFTER = [("dashboard", "0032_langgraph_run_rollback")]


def test_each_langgraph_run_made_before_knows_where_its_run_went_on_from():
    with Migrated() as schema:
        apps = schema.at(BEFORE)
        OldRun = apps.get_model("dashboard", "Run")
        RunEvent = apps.get_model("dashboard", "RunEvent")
        OldLangGraphRun = apps.get_model("dashboard", "LangGraphRun")
        kinds = ["run_started", "interrupt_raised", "run_resumed", "run_paused",
                 "run_continued", "run_resumed", "run_succeeded"]
        run = OldRun.objects.create(graph="acquisition", thread_id=str(uuid.uuid4()),
                                    state="succeeded", last_seq=len(kinds))
        for seq, kind in enumerate(kinds, start=1):
            RunEvent.objects.create(run=run, seq=seq, kind=kind)
        now = timezone.now()
        made = [OldLangGraphRun.objects.create(id=run.id, run=run, first_seq=1,
                                               superseded_at=now).id,
                OldLangGraphRun.objects.create(run=run, first_seq=3, superseded_at=now).id,
                OldLangGraphRun.objects.create(run=run, first_seq=5).id]
        schema.at(AFTER)
        schema.at(schema.executor.loader.graph.leaf_nodes())  # read as the code now does
        found = dict(LangGraphRun.objects.filter(run_id=run.id).values_list(
            "id", "went_on_from"))
        assert [found[i] for i in made] == ["", "interrupted", "paused"]
        assert not LangGraphRun.objects.filter(run_id=run.id).to_roll_back().exists()
