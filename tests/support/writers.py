"""Stray writers: before a transactional test's database is flushed, the crons its
servers would fire are disabled, this process's executor is stopped and its runs still
queued or running are cancelled and waited for; one that does not stop fails the test (a
flush beside a writer deadlocked on ``dashboard_thread``, and the next test met this one's
rows)."""

from __future__ import annotations

import os
import socket
import time

from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

SETTLE_SECONDS = 20.0
"""How long the runs a test left are given to stop once cancelled (a deadlock guard)."""


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
            return left, [str(i) for i in unsettled.values_list("id", flat=True)]
        time.sleep(0.1)
    return [], []
