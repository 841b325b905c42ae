"""Waiting questions made cheaply (no graph executed): runs stored as interrupted, each
with a pending interrupt, for the inbox's tests and its browser tests."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.utils import timezone

from dashboard.models import Interrupt, Run, Thread

REGION = {"field": "core.region", "label": "Region", "prompt": "Which region is the market in?",
          "kind": "region", "choices": ["Germany", "France"], "attempt": 1, "max_attempts": 3}
AUDIENCE = {"field": "5", "prompt": "Who is the audience of the briefing?", "kind": "text",
            "task_id": "5", "attempt": 1}


def waiting(n: int, payload: dict, *, graph: str = "acquisition", goal: str = "Bikes in",
            asked_ago: timedelta = timedelta(minutes=5), user=None) -> list[Interrupt]:
    """``n`` runs of ``graph`` waiting on ``payload``, asked ``asked_ago`` (the first the
    longest ago, a second apart), their goals ``"<goal> <i>"``."""
    now = timezone.now()
    runs = [Run(id=(rid := uuid.uuid4()), graph=graph, thread_id=f"{rid}:planner",
                state=Run.State.INTERRUPTED, input={"goal": f"{goal} {i}"},
                created_by=user, conversation=Thread(id=rid, graph=graph, created_by=user))
            for i in range(n)]
    Thread.objects.bulk_create([r.conversation for r in runs])
    Run.objects.bulk_create(runs)
    rows = Interrupt.objects.bulk_create([
        Interrupt(run=r, interrupt_id=uuid.uuid4().hex, node="ask_user", payload=payload)
        for r in runs])
    for i, row in enumerate(rows):  # created_at is auto_now_add: set the ages after
        Interrupt.objects.filter(pk=row.pk).update(
            created_at=now - asked_ago - timedelta(seconds=n - i))
    return list(Interrupt.objects.filter(pk__in=[r.pk for r in rows]).order_by("created_at"))
