"""Migration 0027 carries runs made by the old schema over to one state field: a status, an
answer not yet taken up and a continue as the last event become one state; people and the
APIs still see the status they saw."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from dashboard.models import Run
from tests.conftest import Migrated

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]

BEFORE = [("dashboard", "0026_merge_event_at")]
AFTER = [("dashboard", "0027_run_state")]


def _old_rows(apps) -> dict[str, uuid.UUID]:
    """Runs as the old code wrote them: (status, an answer not taken up, last event)."""
    OldRun = apps.get_model("dashboard", "Run")
    Interrupt = apps.get_model("dashboard", "Interrupt")
    RunEvent = apps.get_model("dashboard", "RunEvent")
    now = timezone.now()
    made = {}
    for name, status, answered, taken, last in [
            ("queued", "queued", False, False, None),
            ("running", "running", False, False, "run_started"),
            ("asking", "interrupted", False, False, "interrupt_raised"),
            ("answered", "interrupted", True, False, "interrupt_raised"),
            ("answered and taken up", "interrupted", True, True, "interrupt_raised"),
            ("paused", "paused", False, False, "run_paused"),
            ("continued", "paused", False, False, "run_continued"),
            ("continued, then changed", "paused", False, False, "breakpoints_changed"),
            ("succeeded", "succeeded", False, False, "run_succeeded"),
            ("failed", "failed", False, False, "run_failed"),
            ("cancelled", "cancelled", True, False, "run_cancelled")]:
        run = OldRun.objects.create(graph="acquisition", thread_id=f"{uuid.uuid4()}:planner",
                                    status=status, last_seq=1 if last else 0)
        if last:
            RunEvent.objects.create(run=run, seq=1, kind=last)
        if answered:
            Interrupt.objects.create(run=run, interrupt_id="q", status="answered", answer="y",
                                     answered_at=now, taken_up_at=now if taken else None)
        made[name] = run.id
    return made


def test_old_runs_take_one_state_and_keep_the_status_they_showed():
    with Migrated() as schema:
        made = _old_rows(schema.at(BEFORE))
        schema.at(AFTER)
        found = {name: Run.objects.values_list("state", "status").get(id=run_id)
                 for name, run_id in made.items()}
        assert found == {
            "queued": ("queued", "queued"), "running": ("running", "running"),
            "asking": ("interrupted", "interrupted"),
            "answered": ("resuming", "interrupted"),
            "answered and taken up": ("interrupted", "interrupted"),
            "paused": ("paused", "paused"), "continued": ("continuing", "paused"),
            "continued, then changed": ("paused", "paused"),
            "succeeded": ("succeeded", "succeeded"), "failed": ("failed", "failed"),
            "cancelled": ("cancelled", "cancelled")}
        assert set(Run.objects.busy().filter(id__in=made.values()).values_list(
            "state", flat=True)) == {"queued", "running", "resuming", "continuing"}
