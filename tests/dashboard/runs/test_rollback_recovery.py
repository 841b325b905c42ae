"""A rollback asked (``/langgraph/…/cancel?action=rollback``) is written with the cancel:
when the process holding the run dies before the run stopped, the recovery sweep that
finds the run stale does the rollback, once (in one process: its executor stopped as a
dying process's is, the cancel's message to it lost)."""

from __future__ import annotations

import time
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from dashboard import services
from dashboard.models import Interrupt, LangGraphRun, Run, RunEvent
from dashboard.runs import dispatch
from tests.conftest import api_token, assert_gapless, wait_run

Kind = RunEvent.Kind

pytestmark = [pytest.mark.pg, pytest.mark.reliability]


def _node_started(run: Run, *, after: int) -> None:
    """Wait until a node started in the run past seq ``after``."""
    deadline = time.monotonic() + 30
    while not RunEvent.objects.filter(run=run, kind=Kind.NODE_STARTED, seq__gt=after).exists():
        assert time.monotonic() < deadline, "no node started"
        time.sleep(0.02)


def _rolled_back_as_the_process_dies(executor, langgraph_run: LangGraphRun, user) -> None:
    """Ask LangGraph's API to cancel and roll back the LangGraph run, and have the process
    die at once: its executor never hears of the cancel (the message is lost) and stops
    as a killed process's does, leaving the run running with a heartbeat soon stale."""
    client = Client(headers={"x-api-key": api_token(user)})
    with mock.patch.object(dispatch, "request_cancel"):
        answer = client.post(f"/langgraph/threads/{langgraph_run.run.conversation_id}/runs/"
                             f"{langgraph_run.id}/cancel?action=rollback")
    assert answer.status_code == 200, answer.content
    executor.stop()  # the process dies: whatever it held in memory with it
    if connection.vendor == "postgresql":  # and its connections close with it: a write it
        # had begun (a fenced checkpoint write's transaction) holds no lock after it
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                           "datname = current_database() AND pid <> pg_backend_pid() AND "
                           "state = 'idle in transaction'")
    run = Run.objects.get(id=langgraph_run.run_id)
    assert (run.state, run.cancel_requested) == (Run.State.RUNNING, True)
    Run.objects.filter(id=run.id).update(heartbeat_at=timezone.now() - timedelta(hours=1))


def test_a_resume_rolled_back_as_its_process_died_is_rolled_back_by_recovery(
        executor, operator, tmp_path):
    held = tmp_path / "held"  # the steps take their delay while it exists
    run = wait_run(services.run_create(graph="test.echo", user=operator, input={
        "steps": 4, "ask": True, "delay": 30, "held_by": str(held)}).id,
        statuses=("interrupted",))
    asked = Interrupt.objects.get(run=run)
    held.touch()
    services.interrupt_answer(interrupt=asked, answer="first", user=operator)
    resume = Run.objects.get(id=run.id).current_langgraph_run()
    _node_started(run, after=resume.first_seq)  # the step after the answer, 30 s long
    _rolled_back_as_the_process_dies(executor, resume, operator)

    assert services.run_recover_stale() == []  # rolled back, not taken over
    run.refresh_from_db()
    assert run.state == Run.State.INTERRUPTED and not run.cancel_requested
    assert list(run.langgraph_runs.values_list("id", flat=True)) == [run.id]
    assert run.current_langgraph_run().langgraph_status == "interrupted"
    assert assert_gapless(run)[-1].kind == Kind.INTERRUPT_RAISED
    assert run.last_seq == resume.first_seq - 1
    asked.refresh_from_db()
    assert (asked.status, asked.answer) == (Interrupt.Status.PENDING, None)
    assert services.run_recover_stale() == []  # once: nothing is left to do

    held.unlink()
    services.interrupt_answer(interrupt=asked, answer="second", user=operator)
    run = wait_run(run.id, statuses=("succeeded", "failed", "cancelled"))
    assert run.status == Run.Status.SUCCEEDED, run.error_message
    assert run.output == {"n": 4, "answer": "second"}
    assert_gapless(run)


def test_a_first_run_rolled_back_as_its_process_died_is_deleted_by_recovery(executor,
                                                                             operator):
    run = services.run_create(graph="test.echo", user=operator,
                              input={"steps": 3, "delay": 30})
    _node_started(run, after=0)
    _rolled_back_as_the_process_dies(executor, run.current_langgraph_run(), operator)
    assert services.run_recover_stale() == []
    assert not Run.objects.filter(id=run.id).exists()
