"""Every run can be stopped: one whose execution raises past its own handling fails once
instead of being recovered into the same fault for ever, and a cancel ends at once a run
whose executor died."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.db import OperationalError
from django.utils import timezone

import tests.dashboard.interrupt_graphs  # noqa: F401  (registers test.ask)
from dashboard import services
from dashboard.models import Interrupt, Run, RunEvent
from dashboard.runs import execution, store
from dashboard.runs import executor as executor_module
from dashboard.runs.execution import Outcome
from dashboard.runs.jsonsafe import from_column
from tests.conftest import assert_gapless, wait_run

Kind = RunEvent.Kind

pytestmark = pytest.mark.pg  # the engine: both databases (their write paths differ)


def test_a_run_whose_pause_write_raises_fails_once_and_is_not_recovered(
        executor, operator, monkeypatch):
    def overflow(interrupt, graph):
        raise OverflowError("date value out of range")

    monkeypatch.setattr(store, "_ask_groups", overflow)  # as a 1e18 s deadline did
    run = services.run_create(graph="test.ask", input={"payload": {"prompt": "X?"}},
                              user=operator)
    run = wait_run(run.id, statuses=("failed", "cancelled", "succeeded", "interrupted"),
                   timeout=30)
    assert run.status == Run.Status.FAILED and run.owner == ""
    assert run.error_message == "OverflowError: date value out of range"
    events = assert_gapless(run)
    assert events[-1].kind == Kind.RUN_FAILED
    assert services.run_recover_stale() == []  # nothing left to recover
    assert not Interrupt.objects.filter(run=run, status=Interrupt.Status.PENDING).exists()


def test_a_cancel_ends_at_once_a_run_whose_executor_died(executor, operator):
    run = services.run_create(graph="test.ask", input={"payload": {"prompt": "X?"}},
                              user=operator)
    wait_run(run.id, statuses=("interrupted",))
    # as a run left by an executor that died while it ran (its heartbeat long stale)
    Run.objects.filter(id=run.id).update(
        state=Run.State.RUNNING, owner="gone:1:dead",
        heartbeat_at=timezone.now() - timedelta(hours=1))
    services.run_cancel(run=run, user=operator)
    # ended by the cancel itself; or, had the executor's reaper recovered the stale run in
    # the moment before (once in a loaded PostgreSQL pass), by the live executor it asks
    run = wait_run(run.id, statuses=("cancelled",), timeout=30)
    assert run.status == Run.Status.CANCELLED and run.owner == ""
    assert assert_gapless(run)[-1].kind == Kind.RUN_CANCELLED
    services.thread_delete(thread=run.conversation)  # and its thread may go
    assert not Run.objects.filter(id=run.id).exists()


def test_a_float_past_64_bits_in_an_answer_resumes_the_run_on_either_database(
        executor, operator):
    """PostgreSQL's jsonb gives 1e300 back in 301 digits, an integer no checkpoint stores:
    the graph is resumed with the float the client sent, and the run ends."""
    run = services.run_create(graph="test.ask", input={"payload": {"prompt": "X?"}},
                              user=operator)
    wait_run(run.id, statuses=("interrupted",))
    services.interrupt_answer(interrupt=Interrupt.objects.get(run=run),
                              answer={"far": 1e300, "list": [-2e19]}, user=operator)
    run = wait_run(run.id, statuses=("succeeded", "failed"), timeout=30)
    assert run.status == Run.Status.SUCCEEDED, run.error_message
    assert from_column(run.output["answer"]) == {"far": 1e300, "list": [-2e19]}


def test_a_number_read_back_from_a_json_column_is_what_was_written():
    assert from_column({"a": [10**300, -(2**64), 2**63 - 1, True, "1e300"]}) == {
        "a": [1e300, -float(2**64), 2**63 - 1, True, "1e300"]}
    assert type(from_column(10**300)) is float
    assert from_column(10**400) == 10**400  # past any float: the checkpoint write says so


@pytest.mark.parametrize("let_go", [True, False])
def test_a_run_stopped_by_a_database_fault_at_every_claim_fails_after_its_attempts(
        executor, operator, settings, monkeypatch, let_go):
    """Each execution stops on a database fault past its own handling (the run is let go,
    to be recovered when the database is back; or, the database still away, it stays
    held by the executor that dropped it, which recovers it once its heartbeat is stale):
    the third claim without a checkpoint is the last, and the run fails naming its
    attempts and the last error, never looping."""
    settings.PLANWATCH = {**settings.PLANWATCH, "RUN_MAX_ATTEMPTS": 3,
                          "STALE_AFTER_SECONDS": 0.5}
    claims = []

    async def faulty(claim, **_):
        claims.append(claim.kind)
        raise OperationalError(f"server closed the connection unexpectedly ({len(claims)})")

    monkeypatch.setattr(executor_module, "aexecute", faulty)
    if not let_go:
        def still_away(run_id, *, owner, error):
            raise OperationalError("could not connect to server")
        monkeypatch.setattr(executor_module, "release_failed", still_away)
    run = services.run_create(graph="test.echo", input={"steps": 2}, user=operator)
    deadline = time.monotonic() + 60  # a deadlock guard, not a speed test
    while (run := Run.objects.get(id=run.id)).status != Run.Status.FAILED:
        assert time.monotonic() < deadline, (run.status, run.attempts, claims)
        assert len(claims) <= 3, "recovered past its attempts"
        services.run_recover_stale()  # the reaper's sweep
        time.sleep(0.1)
    assert claims == [Kind.RUN_STARTED, Kind.RUN_RECOVERED, Kind.RUN_RECOVERED]
    assert run.owner == "" and run.epoch == 3
    assert "claimed 3 times" in run.error_message
    assert "PLANWATCH_RUN_MAX_ATTEMPTS is 3" in run.error_message
    if let_go:  # (else no error could be kept: the database was "away")
        assert "OperationalError: server closed the connection unexpectedly (3)" in \
            run.error_message
    failed = assert_gapless(run)[-1]
    assert failed.kind == Kind.RUN_FAILED and failed.payload["attempts"] == 3
    assert services.run_recover_stale() == []  # nothing left to recover
    assert len(claims) == 3


def test_a_run_that_gets_on_between_faults_is_recovered_past_its_attempts(
        executor, operator, settings, monkeypatch):
    """A checkpoint written since the last claim starts the count again: a run stopped by
    a database fault after each step it takes (a kill storm) is recovered each time and
    ends, even allowed a single attempt."""
    settings.PLANWATCH = {**settings.PLANWATCH, "RUN_MAX_ATTEMPTS": 1}
    real = executor_module.aexecute
    faults = []

    async def fault_after_a_checkpoint(claim, **kwargs):
        writer, requests = kwargs["writer"], kwargs["requests"]
        add = writer.add

        def watch(fields):
            add(fields)
            if fields.get("kind") == Kind.CHECKPOINT:
                requests.handover = True  # it stops at its next node boundary
        writer.add = watch
        outcome = await real(claim, **kwargs)
        if outcome is Outcome.HANDED_OVER:  # as if the database went then
            faults.append(claim.kind)
            raise OperationalError("terminating connection due to administrator command")
        return outcome

    async def held_on(run_id, *, owner):  # the fault comes before the run is let go
        return 0

    monkeypatch.setattr(executor_module, "aexecute", fault_after_a_checkpoint)
    monkeypatch.setattr(execution, "arelease", held_on)
    run = services.run_create(graph="test.echo", input={"steps": 3}, user=operator)
    deadline = time.monotonic() + 60  # a deadlock guard, not a speed test
    while (run := Run.objects.get(id=run.id)).status not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, (run.status, run.attempts, faults)
        services.run_recover_stale()
        time.sleep(0.1)
    assert run.status == Run.Status.SUCCEEDED, run.error_message
    assert len(faults) >= 3 and faults[1:] == [Kind.RUN_RECOVERED] * (len(faults) - 1)
    assert_gapless(run)


def test_a_run_a_draining_process_handed_on_is_no_failed_attempt(executor, settings):
    """A rolling restart may hand a run on, process after process, before its next
    checkpoint: a stop its executor chose does not count against it."""
    settings.PLANWATCH = {**settings.PLANWATCH, "RUN_MAX_ATTEMPTS": 1}
    run = Run.objects.create(graph="test.echo", thread_id="drained", input={"steps": 1},
                             state="running", owner="exec-a", heartbeat_at=timezone.now(),
                             started_at=timezone.now(), epoch=1, attempts=1)
    assert store.release_runs(owner="exec-a") == 1
    claim = async_to_sync(store.aclaim_orm)(run.id, "exec-b", "recover")
    assert claim is not None and claim.kind == Kind.RUN_RECOVERED
    assert Run.objects.get(id=run.id).attempts == 1 == claim.run.attempts
