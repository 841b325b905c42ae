"""One state machine: a run's state is one field, and the table in
``dashboard/runs/states.py`` is walked here — every declared transition is allowed, every
undeclared one refused, by the table itself and by the code that applies it (the
services' preconditions, the claims, the executor's stops); what each state means (busy,
active, the status people see, the thread's and LangGraph's) is read from it."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from dashboard import services
from dashboard.models import Interrupt, Run, RunEvent
from dashboard.runs import states, store
from dashboard.runs.states import State

pytestmark = [pytest.mark.pg, pytest.mark.django_db]

ALL = list(State)


def _run(state: str, **columns) -> Run:
    return Run.objects.create(graph="acquisition", thread_id=f"{uuid.uuid4()}:planner",
                              state=state, last_seq=0, **columns)


def test_the_table_allows_what_it_declares_and_refuses_the_rest():
    for transition in states.TRANSITIONS:
        for state in ALL:
            if state in transition.moves:
                assert states.allows(state, transition)
                found = states.targets(transition, state)
                if len(found) == 1 and found[0] == transition.moves[state]:
                    assert states.move(state, transition) == found[0]
                else:  # an undo: its caller names which, one of those declared
                    assert [states.move(state, transition, to=to) for to in found] == [
                        *found]
                    with pytest.raises(states.Refused, match=transition.name):
                        states.move(state, transition)
                    with pytest.raises(states.Refused, match=transition.name):
                        states.move(state, transition, to=State.RUNNING)
            else:
                assert not states.allows(state, transition), (state, transition)
                with pytest.raises(states.Refused, match=transition.name):
                    states.move(state, transition)


def test_every_state_means_one_status_thread_status_and_langgraph_status():
    assert set(states.MEANINGS) == set(State)
    assert {m.status for m in states.MEANINGS.values()} == set(Run.Status)
    assert {m.langgraph for m in states.MEANINGS.values()} <= set(states.LANGGRAPH_STATUSES)
    kinds = {kind for t in states.TRANSITIONS for kind in t.events}
    assert kinds <= set(RunEvent.Kind)
    # an answer or a continue waiting for an executor is shown as before, and busy
    assert states.status_of(State.RESUMING) == Run.Status.INTERRUPTED
    assert states.status_of(State.CONTINUING) == Run.Status.PAUSED
    assert states.STATUS_AFTER["run_continued"] == Run.Status.PAUSED
    # a final or an active state has a status of its own (a doorbell carries the status)
    for flag, shown in (("finished", Run.FINISHED), ("active", Run.ACTIVE)):
        assert not set(shown) & {m.status for m in states.MEANINGS.values()
                                 if not getattr(m, flag)}


@pytest.mark.parametrize("state", ALL)
def test_every_caller_gets_one_answer_to_is_this_run_busy(state):
    run = _run(state)
    busy = states.meaning(state).busy
    assert Run.objects.busy().filter(id=run.id).exists() is busy
    assert Run.objects.get(id=run.id).is_busy() is busy
    assert run.is_active is states.meaning(state).active
    assert Run.objects.get(id=run.id).status == states.status_of(state)  # the database's
    assert list(Run.objects.filter(state__in=states.showing(run.status))) == [run]


def _refused_or_moved(run: Run, transition: states.Transition, act) -> None:
    """``act()`` moves the run as the table says, or is refused if it declares nothing."""
    before = run.state
    if states.allows(before, transition):
        act()
        run.refresh_from_db()
        assert run.state == states.move(before, transition)
    else:
        with pytest.raises(services.ServiceError):
            act()
        run.refresh_from_db()
        assert run.state == before


@pytest.mark.parametrize("state", ALL)
def test_the_services_take_their_preconditions_from_the_table(state, operator):
    def fresh() -> Run:
        return _run(state, owner="exec-1" if state == State.RUNNING else "")

    run = fresh()
    asked = Interrupt.objects.create(run=run, interrupt_id="q", node="ask")
    _refused_or_moved(run, states.ANSWER, lambda: services.interrupt_answer(
        interrupt=asked, answer="yes", user=operator))
    run = fresh()
    _refused_or_moved(run, states.CONTINUE, lambda: services.run_continue(
        run=run, user=operator))
    run = fresh()
    _refused_or_moved(run, states.SET_BREAKPOINTS, lambda: services.run_breakpoints_set(
        run=run, interrupt_before=[], interrupt_after=[], user=operator))
    run = fresh()
    cancel = states.REQUEST_CANCEL if run.owner else states.CANCEL  # held: asked to stop
    _refused_or_moved(run, cancel, lambda: services.run_cancel(run=run, user=operator))
    run = fresh()
    if states.allows(state, states.DELETE):
        services.run_delete(run=run)
        assert not Run.objects.filter(id=run.id).exists()
    else:
        with pytest.raises(services.RunStateError):
            services.run_delete(run=run)


@pytest.mark.parametrize("went_on_from", states.WAITED)
@pytest.mark.parametrize("state", ALL)
def test_a_rollback_takes_a_run_back_only_from_the_states_the_table_declares(state,
                                                                            went_on_from):
    """A resume's or a continue's LangGraph run asked to be rolled back: done once the run
    stopped, back to where it went on from, its log back to the seq before it; a run an
    executor holds (or is to) keeps it asked."""
    run = store.create_run(graph="acquisition", thread_id=str(uuid.uuid4()), state=state,
                           last_seq=4, owner="exec-1" if state == State.RUNNING else "",
                           heartbeat_at=timezone.now())
    for seq in range(1, 5):
        RunEvent.objects.create(run=run, seq=seq, kind=RunEvent.Kind.CUSTOM)
    run.langgraph_runs.update(superseded_at=timezone.now())
    run.langgraph_runs.create(first_seq=3, went_on_from=went_on_from,
                              rollback_requested_at=timezone.now())
    done = store.roll_back_requested(run.id)
    run.refresh_from_db()
    if states.allows(state, states.ROLL_BACK):
        assert (done, run.state, run.last_seq) == (store.ROLLED_BACK, went_on_from, 2)
        assert list(run.events.values_list("seq", flat=True)) == [1, 2]
        assert run.langgraph_runs.get().is_current
    else:
        assert (done, run.state, run.last_seq, run.langgraph_runs.count()) == ("", state, 4, 2)


# what a claim in each mode may take: a fresh start, or a continue, only when asked for;
# a dead executor's run, or an answered one, whatever the dispatch said
CLAIMS = {"start": (states.START, states.RECOVER, states.RESUME),
          "continue": (states.GO_ON, states.RECOVER, states.RESUME),
          "recover": (states.RECOVER, states.RESUME), "resume": (states.RECOVER, states.RESUME)}


@pytest.mark.parametrize("mode", list(CLAIMS))
@pytest.mark.parametrize("state", ALL)
def test_a_claim_takes_only_the_runs_the_table_lets_it_take(state, mode, operator):
    stale = timezone.now() - timedelta(hours=1)
    run = _run(state, owner="dead" if state == State.RUNNING else "", heartbeat_at=stale)
    Interrupt.objects.create(run=run, interrupt_id="q", status=Interrupt.Status.ANSWERED,
                             answer="yes", answered_at=timezone.now())
    taken = async_to_sync(store.aclaim_orm)(run.id, "exec-2", mode)
    run.refresh_from_db()
    if any(states.allows(state, t) for t in CLAIMS[mode]):
        assert taken is not None and (run.state, run.owner) == (State.RUNNING, "exec-2")
    else:
        assert taken is None and run.state == state


def test_an_execution_stops_only_a_running_run():
    for status, transition in states.STOPS.items():
        for state in ALL:
            if states.allows(state, transition):
                fields = store.stop(status=status, current=state, now=timezone.now())
                assert fields["state"] == status
            else:
                with pytest.raises(states.Refused):
                    store.stop(status=status, current=state, now=timezone.now())


def test_an_answer_is_unconsumed_until_an_executor_takes_it_up():
    run = _run(State.RESUMING)
    Interrupt.objects.create(run=run, interrupt_id="i-1", node="ask_user",
                             status=Interrupt.Status.ANSWERED, answer="x",
                             answered_at=timezone.now())
    assert Interrupt.objects.unconsumed().filter(run=run).count() == 1
    Interrupt.objects.filter(run=run).take_up("")  # the run had no root checkpoint yet
    assert not Interrupt.objects.unconsumed().filter(run=run).exists()


def test_a_process_recovers_only_the_runs_of_graphs_it_has(settings, monkeypatch):
    from dashboard.runs import dispatch

    dispatched: list = []
    monkeypatch.setattr(dispatch, "dispatch", lambda run_id, mode: dispatched.append(run_id))
    long_ago = timezone.now() - timedelta(minutes=5)
    ours = Run.objects.create(graph="acquisition", thread_id=f"{uuid.uuid4()}:planner",
                              state=State.RUNNING, owner="gone", heartbeat_at=long_ago)
    # a run of a graph another process serves (its langgraph.json): left for that process,
    # which can build it (this one would fail it: "unknown graph")
    Run.objects.create(graph="someone-elses", thread_id=f"{uuid.uuid4()}:planner",
                       state=State.RUNNING, owner="gone", heartbeat_at=long_ago)
    assert services.run_recover_stale() == [ours.id] == dispatched
