"""A LangGraph run is a run request of LangGraph's API: a ``Run`` gets one when it is made
and one more whenever it goes on after stopping for an operator, whoever answered or
continued it (the pages, ``/api/``, ``/langgraph/``); its status is its ``Run``'s while it
is the current one, ``interrupted`` once another went on after it."""

from __future__ import annotations

import uuid

import pytest

from dashboard import services
from dashboard.models import Interrupt, LangGraphRun, Run
from dashboard.runs import states, store
from dashboard.runs.states import State

pytestmark = [pytest.mark.pg, pytest.mark.django_db]


def _run(state: str, last_seq: int = 3) -> Run:
    """A run stored as the store makes one (with its first LangGraph run), in ``state``."""
    return store.create_run(graph="acquisition", thread_id=f"{uuid.uuid4()}", state=state,
                            last_seq=last_seq)


def test_only_a_run_stopped_for_an_operator_that_goes_on_gets_a_langgraph_run():
    going_on = {(before, after) for transition in states.TRANSITIONS
                for before in transition.moves
                for after in states.targets(transition, before)
                if states.goes_on(before, after)}
    assert going_on == {(State.INTERRUPTED, State.RESUMING), (State.PAUSED, State.CONTINUING)}


def test_a_run_starts_with_one_langgraph_run_of_its_own_id():
    run = _run(State.QUEUED, last_seq=0)
    (only,) = run.langgraph_runs.all()
    assert (only.id, only.first_seq, only.is_first, only.is_current) == (run.id, 1, True, True)
    assert only.langgraph_status == "pending" and run.langgraph_run_ids() == [str(run.id)]


def test_an_answer_from_the_pages_makes_the_next_langgraph_run_and_a_second_answer_none(
        django_user_model):
    operator = django_user_model.objects.create_superuser("op", password="x")
    run = _run(State.INTERRUPTED, last_seq=7)
    first, second = (Interrupt.objects.create(run=run, interrupt_id=q) for q in ("a", "b"))
    services.interrupt_answer(interrupt=first, answer="Germany", user=operator,
                              via=Interrupt.Channel.PAGE)
    run.refresh_from_db()
    started, resumed = run.langgraph_runs.order_by("first_seq")
    assert resumed.first_seq == 8 and run.current_langgraph_run() == resumed
    assert started.superseded_at is not None and started.last_seq() == 7
    assert (started.langgraph_status, resumed.langgraph_status) == ("interrupted", "pending")
    services.interrupt_answer(interrupt=second, answer="EUR", user=operator)  # resuming
    assert run.langgraph_runs.count() == 2
    assert list(LangGraphRun.objects.filter(run=run).with_langgraph_status(
        "interrupted")) == [started]
    assert list(LangGraphRun.objects.filter(run=run).with_langgraph_status(
        "pending")) == [resumed]


def test_a_continue_is_a_langgraph_run_from_its_run_continued_event(django_user_model):
    operator = django_user_model.objects.create_superuser("op", password="x")
    run = _run(State.PAUSED, last_seq=4)
    services.run_continue(run=run, user=operator)
    services.run_continue(run=run, user=operator)  # again, before an executor took it
    continued = run.current_langgraph_run()
    assert run.langgraph_runs.count() == 2 and continued.first_seq == 5
    assert list(run.events.values_list("seq", "kind")) == [(5, "run_continued"),
                                                           (6, "run_continued")]
    assert run.langgraph_run_ids() == [str(continued.id), str(run.id)]
