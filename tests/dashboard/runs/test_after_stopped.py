"""What follows a run's stop in its executor's process (``dispatch.after_stopped``): a
rollback a client asked, then the runs waiting on it; one query when there is neither."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard.models import LangGraphRun, Run, Thread
from dashboard.runs import dispatch

pytestmark = [pytest.mark.pg, pytest.mark.both, pytest.mark.django_db]


def _run(thread: Thread, state: str, **columns) -> Run:
    run = Run.objects.create(graph="acquisition", thread_id=str(thread.id), state=state,
                             conversation=thread, **columns)
    LangGraphRun.objects.create(id=run.id, run=run, first_seq=1, created_at=run.created_at)
    return run


@pytest.fixture
def handed(monkeypatch) -> list[tuple[uuid.UUID, str]]:
    """The runs ``after_stopped`` hands to an executor (not executed here)."""
    handed: list[tuple[uuid.UUID, str]] = []
    monkeypatch.setattr(dispatch, "dispatch", lambda run_id, mode: handed.append(
        (run_id, mode)))
    return handed


def test_a_stop_with_nothing_waiting_is_one_query(handed):
    thread = Thread.objects.create(id=uuid.uuid4())
    stopped = _run(thread, Run.State.SUCCEEDED)
    with CaptureQueriesContext(connection) as asked:
        dispatch.after_stopped(stopped.id)
    assert len(asked) == 1
    assert handed == []


@pytest.mark.parametrize(("state", "mode", "behind"), [
    (Run.State.QUEUED, "start", True),  # enqueued behind it
    (Run.State.QUEUED, "start", False),  # its claim found the stopped run running
    (Run.State.RESUMING, "resume", False),  # answered while the stopped run ran
])
def test_the_runs_waiting_on_a_stop_go_on(handed, state, mode, behind):
    thread = Thread.objects.create(id=uuid.uuid4())
    stopped = _run(thread, Run.State.SUCCEEDED)
    waiting = _run(thread, state, waits_for=stopped if behind else None)
    dispatch.after_stopped(stopped.id)
    assert handed == [(waiting.id, mode)]


def test_a_rollback_asked_is_done_at_the_stop(handed):
    thread = Thread.objects.create(id=uuid.uuid4())
    stopped = _run(thread, Run.State.CANCELLED)
    LangGraphRun.objects.filter(id=stopped.id).update(rollback_requested_at=timezone.now())
    dispatch.after_stopped(stopped.id)
    assert not Run.objects.filter(id=stopped.id).exists()  # its first: the run goes
