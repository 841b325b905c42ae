"""Stray writers: before a transactional test's database is flushed, the crons its
servers would fire are disabled, this process's executor is stopped and its runs still
queued or running are cancelled and given a moment to stop; those that do not are ended in
the database with their epoch moved on, so a writer still holding one is fenced off (a
flush beside a writer deadlocked on ``dashboard_thread``, and the next test met this one's
rows)."""

from __future__ import annotations

import os
import socket
import time

from django.contrib.auth.models import AnonymousUser
from django.db.models import F
from django.utils import timezone

SETTLE_SECONDS = 2.0
"""How long the runs a test left are given to stop once cancelled; then they are ended in
the database and their epoch moved on, so a writer still holding one is fenced off (its
next write refused: it stops) rather than waited for (a test's hand-made run "held" by an
owner that is no process kept every such test 20 s in its teardown)."""


def writers_stop(*, timeout: float = SETTLE_SECONDS) -> tuple[list[str], list[str]]:
    """Disable every cron, cancel every queued or running run and wait for them to stop;
    the runs that were left unsettled, and those still unsettled after ``timeout``."""
    from dashboard import services
    from dashboard.models import Run
    from dashboard.models_langgraph import Cron
    from dashboard.runs import dispatch, states, store

    Cron.objects.filter(enabled=True).update(enabled=False)
    # this process's executor first: stopped, the runs it held are nobody's (ended below)
    dispatch.reset_executor()
    Run.objects.filter(owner__startswith=f"{socket.gethostname()}:{os.getpid()}:").update(
        owner="")
    unsettled = Run.objects.filter(state__in=(Run.State.QUEUED, Run.State.RUNNING))
    left = [str(run_id) for run_id in unsettled.values_list("id", flat=True)]
    deadline = time.monotonic() + timeout
    while left:
        now = timezone.now()
        for run in unsettled:
            if run.cancel_requested and store.held_alive(run, now=now):
                continue  # asked already; its executor stops it
            try:  # a dead executor's run ends at once; a live one's is asked to stop
                if run.allows(states.CANCEL):
                    services.run_cancel(run=run, user=AnonymousUser())
            except services.ServiceError:
                pass  # it stopped meanwhile
        if not unsettled.exists():
            return left, []
        if time.monotonic() > deadline:
            stuck = [str(i) for i in unsettled.values_list("id", flat=True)]
            unsettled.update(state=Run.State.CANCELLED, owner="", epoch=F("epoch") + 1,
                             finished_at=timezone.now())
            return left, [i for i in stuck if unsettled.filter(id=i).exists()]
        time.sleep(0.1)
    return [], []
