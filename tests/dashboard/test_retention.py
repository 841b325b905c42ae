"""``manage.py prune``: finished runs older than N days go with their events, questions
and checkpoints; --keep-audit keeps who answered what; newer and unfinished runs stay."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from dashboard import services
from dashboard.models import Interrupt, Run, RunEvent, Thread
from dashboard.models_checkpoints import Checkpoint
from dashboard.retention import prune_periodically
from tests.conftest import wait_run

pytestmark = pytest.mark.pg

Kind = RunEvent.Kind
ECHO_ASK = {"steps": 4, "ask": True}


def answered_run(operator) -> Run:
    """An echo run that asked a question, was answered by ``operator`` and succeeded."""
    run = wait_run(services.run_create(graph="test.echo", input=ECHO_ASK, user=operator).id)
    question = Interrupt.objects.get(run=run)
    services.interrupt_answer(interrupt=question, answer="yes", user=operator)
    return wait_run(run.id, statuses=("succeeded", "failed"))


def age(run: Run, days: float) -> None:
    """Make ``run`` (and its events) look ``days`` old."""
    then = timezone.now() - timedelta(days=days)
    Run.objects.filter(id=run.id).update(created_at=then, finished_at=then)
    RunEvent.objects.filter(run_id=run.id).update(created_at=then)


@pytest.fixture
def runs(executor, operator):
    """An old answered run, a new one, and an old run still waiting with a model call."""
    old, new = answered_run(operator), answered_run(operator)
    waiting = wait_run(services.run_create(graph="test.echo", input=ECHO_ASK,
                                           user=operator).id)
    RunEvent.objects.create(run=waiting, seq=waiting.last_seq + 1, kind=Kind.MODEL_FINISHED,
                            payload={"model": "m", "messages": [{"text": "secret prompt"}],
                                     "output": {"text": "an answer"}, "usage": None})
    for run in (old, waiting):
        age(run, 40)
    assert Checkpoint.objects.filter(thread_id=old.thread_id).exists()
    return old, new, waiting


def test_prune_deletes_old_finished_runs_their_events_and_checkpoints(runs, capsys):
    old, new, waiting = runs
    call_command("prune", "--older-than", "30")
    assert not Run.objects.filter(id=old.id).exists()
    assert not RunEvent.objects.filter(run_id=old.id).exists()
    assert not Interrupt.objects.filter(run_id=old.id).exists()
    assert not Checkpoint.objects.filter(thread_id=old.thread_id).exists()
    assert Checkpoint.objects.filter(thread_id=new.thread_id).exists()
    assert set(Run.objects.values_list("id", flat=True)) == {new.id, waiting.id}
    call = RunEvent.objects.get(run=waiting, kind=Kind.MODEL_FINISHED).payload
    assert "messages" not in call and "output" not in call and call["redacted"] is True
    assert call["model"] == "m"  # the metadata stays
    assert "pruned 1 runs" in capsys.readouterr().out


def test_keep_audit_keeps_who_answered_what(runs, operator):
    old, new, _ = runs
    call_command("prune", "--older-than", "30", "--keep-audit")
    kept = Run.objects.get(id=old.id)
    assert kept.status == Run.Status.SUCCEEDED
    question = Interrupt.objects.get(run=kept)
    assert (question.answer, question.answered_by) == ("yes", operator)
    kinds = set(RunEvent.objects.filter(run=kept).values_list("kind", flat=True))
    assert Kind.INTERRUPT_ANSWERED in kinds and Kind.RUN_SUCCEEDED in kinds
    assert Kind.NODE_FINISHED not in kinds and Kind.CHECKPOINT not in kinds
    assert not Checkpoint.objects.filter(thread_id=old.thread_id).exists()
    assert RunEvent.objects.filter(run=new, kind=Kind.NODE_FINISHED).exists()


def test_the_periodic_prune_follows_the_setting(runs, settings):
    old, _, _ = runs
    settings.PLANWATCH = {**settings.PLANWATCH, "RETENTION_DAYS": 0}
    assert prune_periodically() is None and Run.objects.filter(id=old.id).exists()
    settings.PLANWATCH = {**settings.PLANWATCH, "RETENTION_DAYS": 30}
    assert prune_periodically().runs == 1
    assert not Run.objects.filter(id=old.id).exists()


@pytest.mark.django_db
def test_an_empty_old_thread_goes_and_a_new_one_stays(operator):
    old = services.thread_create(user=operator)
    new = services.thread_create(user=operator)
    Thread.objects.filter(id=old.id).update(updated_at=timezone.now() - timedelta(days=40))
    call_command("prune", "--older-than", "30")
    assert list(Thread.objects.values_list("id", flat=True)) == [new.id]
