"""A command racing a resume (or another command) on one waiting thread: an update alone,
goto '__end__'. Every command is decided under the thread's lock (``thread_runs``), so
the two decide one after another, the second seeing what the first did: a request the
first made moot gets the 409 a late one gets, and writes nothing.

A connection of the test's own holds the thread's row until both requests wait on it,
the first before the second (``tests.support.racing``), so both reach the decision before
either is decided, in a known order, whatever the machine's speed.
"""

from __future__ import annotations

import httpx
import pytest

from dashboard.models import Interrupt, Run, RunEvent
from tests.conftest import api_token, wait_run
from tests.support.racing import race, waiting_thread

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True), pytest.mark.server]

ASKED = {"item": "lamp", "quantity": 1}  # the orders graph's state as it asks


@pytest.fixture
def waiting(lg_url, sdk_user):
    """A thread of the orders graph waiting for its approval, and a request on it."""
    headers = {"x-api-key": api_token(sdk_user)}
    tid, run = waiting_thread(lg_url, headers)

    def send(command):
        return lambda: httpx.post(f"{lg_url}/threads/{tid}/runs", headers=headers,
                                  timeout=60, json={"assistant_id": "orders",
                                                    "command": command})

    def state():
        return httpx.get(f"{lg_url}/threads/{tid}/state", headers=headers).json()

    return tid, run, send, state


def test_a_resume_before_an_update_wins_and_the_update_is_refused(waiting):
    tid, run, send, state = waiting
    resumed, updated = race(tid, send({"resume": "yes"}), send({"update": {"item": "desk"}}))
    assert resumed.status_code == 200, resumed.text
    assert updated.status_code == 409, updated.text  # as an update of any busy thread
    assert "is busy with run" in updated.json()["detail"]
    wait_run(run.id, statuses=("succeeded",))
    assert state()["values"] == {**ASKED, "approved": "yes"}  # none of the update


def test_an_update_before_a_resume_is_in_the_state_the_resume_goes_on_from(waiting):
    tid, run, send, state = waiting
    updated, resumed = race(tid, send({"update": {"item": "desk"}}), send({"resume": "yes"}))
    assert updated.status_code == 200 and updated.json()["status"] == "interrupted", (
        updated.text)
    assert resumed.status_code == 200, resumed.text
    wait_run(run.id, statuses=("succeeded",))
    assert state()["values"] == {"item": "desk", "quantity": 1, "approved": "yes"}


def test_a_resume_before_an_end_wins_and_the_end_is_refused(waiting):
    tid, run, send, state = waiting
    resumed, ended = race(tid, send({"resume": "yes"}),
                          send({"goto": "__end__", "update": {"item": "desk"}}))
    assert resumed.status_code == 200, resumed.text
    assert ended.status_code == 409, ended.text
    assert "is busy with run" in ended.json()["detail"]
    wait_run(run.id, statuses=("succeeded",))
    assert state()["values"] == {**ASKED, "approved": "yes"}  # none of the end's update
    assert not run.events.filter(kind=RunEvent.Kind.RUN_CANCELLED).exists()


def test_an_end_before_a_resume_wins_and_the_resume_is_refused(waiting):
    tid, run, send, state = waiting
    ended, resumed = race(tid, send({"goto": "__end__", "update": {"item": "desk"}}),
                          send({"resume": "yes"}))
    assert ended.status_code == 200, ended.text
    assert resumed.status_code == 409, resumed.text  # as a resume of any ended thread
    assert "is cancelled, not waiting for an answer" in resumed.json()["detail"]
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert [(i.status, i.answer) for i in run.interrupts.all()] == [
        (Interrupt.Status.CANCELLED, None)]
    now = state()
    assert now["values"] == {"item": "desk", "quantity": 1} and now["next"] == []


def test_of_two_racing_ends_one_is_written_and_the_other_refused(waiting):
    """Both end the thread, both decided on the waiting checkpoint (the second seeing the
    run the first ended): the one written first is written there; the other would land
    its update on a state it was never decided on, so it is refused and writes nothing
    (as LangGraph's server refuses a run on a thread with one in flight under
    multitask_strategy 'reject'; Planwatch refuses a command on a busy thread so). Which
    one writes first is the machine's to say: each request writes once its decision
    committed, as its thread gets there."""
    tid, run, send, state = waiting
    updates = {"first": {"item": "desk"}, "second": {"quantity": 9}}
    first, second = race(tid, send({"goto": "__end__", "update": updates["first"]}),
                         send({"goto": "__end__", "update": updates["second"]}))
    answers = {"first": first, "second": second}
    written = [n for n, r in answers.items() if r.status_code == 200]
    assert len(written) == 1, {n: r.text for n, r in answers.items()}
    [winner], [loser] = written, set(answers) - set(written)
    assert answers[loser].status_code == 409, answers[loser].text
    assert "moved on before its update and end was written: it was decided on checkpoint" \
        in answers[loser].json()["detail"]
    assert run.events.filter(kind=RunEvent.Kind.RUN_CANCELLED).count() == 1
    now = state()
    assert now["values"] == {**ASKED, **updates[winner]} and now["next"] == []
    assert [e.payload["values"] for e in run.events.filter(
        kind=RunEvent.Kind.CHECKPOINT, payload__source="update").order_by("seq")] == [
        updates[winner], None]  # its update, then its end: none of the other's


def test_an_end_sent_after_an_end_was_written_is_written_on_it(waiting):
    """Not racing: the second is decided on the checkpoint the first wrote, and written."""
    _, _, send, state = waiting
    assert send({"goto": "__end__", "update": {"item": "desk"}})().status_code == 200
    later = send({"goto": "__end__", "update": {"quantity": 9}})()
    assert later.status_code == 200, later.text
    assert state()["values"] == {"item": "desk", "quantity": 9}
