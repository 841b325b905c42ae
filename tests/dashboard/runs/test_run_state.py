"""One table of run states: what ``Run.objects.busy()`` says in SQL, ``Run.is_busy()`` says
of a run read plainly and of one read through ``with_unsettled()``; and an answer stays
unconsumed until an executor takes it up."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from dashboard.models import Interrupt, Run, RunEvent

pytestmark = [pytest.mark.pg, pytest.mark.django_db]

S = Run.Status

# status, an answer recorded and not taken, the last event a continue: busy?
STATES = [
    (S.QUEUED, False, False, True),
    (S.RUNNING, False, False, True),
    (S.INTERRUPTED, False, False, False),
    (S.INTERRUPTED, True, False, True),  # about to resume with the answer
    (S.PAUSED, False, False, False),
    (S.PAUSED, False, True, True),  # about to go on from the breakpoint
    (S.SUCCEEDED, False, False, False),
    (S.FAILED, False, False, False),
    (S.CANCELLED, False, False, False),
]


def _run(status: str, *, answered: bool, continued: bool) -> Run:
    run = Run.objects.create(graph="acquisition", thread_id=f"{uuid.uuid4()}:planner",
                             status=status, last_seq=2)
    RunEvent.objects.create(run=run, seq=1, kind=RunEvent.Kind.RUN_STARTED)
    RunEvent.objects.create(run=run, seq=2, kind=RunEvent.Kind.RUN_CONTINUED if continued
                            else RunEvent.Kind.RUN_PAUSED)
    if answered:
        Interrupt.objects.create(run=run, interrupt_id="i-1", node="ask_user",
                                 status=Interrupt.Status.ANSWERED, answer="x",
                                 answered_at=timezone.now())
    return run


@pytest.mark.parametrize(("status", "answered", "continued", "busy"), STATES)
def test_every_caller_gets_one_answer_to_is_this_run_busy(status, answered, continued, busy):
    run = _run(status, answered=answered, continued=continued)
    assert Run.objects.busy().filter(id=run.id).exists() is busy
    assert Run.objects.get(id=run.id).is_busy() is busy
    assert Run.objects.with_unsettled().get(id=run.id).is_busy() is busy
    assert run.is_active is (status in (S.QUEUED, S.RUNNING))


def test_an_answer_is_unconsumed_until_an_executor_takes_it_up():
    run = _run(S.INTERRUPTED, answered=True, continued=False)
    assert Interrupt.objects.unconsumed().filter(run=run).count() == 1
    Interrupt.objects.filter(run=run).take_up("")  # the run had no root checkpoint yet
    assert not Interrupt.objects.unconsumed().filter(run=run).exists()
    assert not Run.objects.get(id=run.id).is_busy()


def test_a_process_recovers_only_the_runs_of_graphs_it_has(settings, monkeypatch):
    from datetime import timedelta

    from dashboard import services
    from dashboard.runs import dispatch

    dispatched: list = []
    monkeypatch.setattr(dispatch, "dispatch", lambda run_id, mode: dispatched.append(run_id))
    long_ago = timezone.now() - timedelta(minutes=5)
    ours = Run.objects.create(graph="acquisition", thread_id=f"{uuid.uuid4()}:planner",
                              status=S.RUNNING, owner="gone", heartbeat_at=long_ago)
    # a run of a graph another process serves (its langgraph.json): left for that process,
    # which can build it (this one would fail it: "unknown graph")
    Run.objects.create(graph="someone-elses", thread_id=f"{uuid.uuid4()}:planner",
                       status=S.RUNNING, owner="gone", heartbeat_at=long_ago)
    assert services.run_recover_stale() == [ours.id] == dispatched
