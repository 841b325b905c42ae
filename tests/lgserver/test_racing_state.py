"""A state update (``POST /threads/<id>/state``) racing a resume, or another state update, on
one waiting thread. A state update is decided as a run request's command is
(``thread_runs``): under the thread's lock, the two one after the other, the second seeing
what the first did, and written once that decision committed, on the checkpoint it was
decided on (else a 409 that writes nothing), so it never lands on a checkpoint another
request already moved past, and is never lost beside it. Raced as
``test_racing_commands`` races commands (``tests.support.racing``).
"""

from __future__ import annotations

import httpx
import pytest

from dashboard.models import Interrupt, RunEvent
from tests.conftest import api_token, wait_run
from tests.support.racing import race, waiting_thread

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True), pytest.mark.server]

ASKED = {"item": "lamp", "quantity": 1}  # the orders graph's state as it asks


@pytest.fixture
def waiting(lg_url, sdk_user):
    """A thread of the orders graph waiting for its approval; a resume of it, a state
    update of it, and its state."""
    headers = {"x-api-key": api_token(sdk_user)}
    tid, run = waiting_thread(lg_url, headers)

    def resume(answer):
        return lambda: httpx.post(f"{lg_url}/threads/{tid}/runs", headers=headers,
                                  timeout=60, json={"assistant_id": "orders",
                                                    "command": {"resume": answer}})

    def update(values, **more):
        return lambda: httpx.post(f"{lg_url}/threads/{tid}/state", headers=headers,
                                  timeout=60, json={"values": values, **more})

    def state():
        return httpx.get(f"{lg_url}/threads/{tid}/state", headers=headers).json()

    return tid, run, resume, update, state


def edits(run):
    """The state updates written into ``run``'s log (their values, in order)."""
    return [e.payload["values"] for e in run.events.filter(
        kind=RunEvent.Kind.CHECKPOINT, payload__source="update").order_by("seq")]


def test_a_resume_before_a_state_update_wins_and_the_update_is_refused(waiting):
    tid, run, resume, update, state = waiting
    resumed, updated = race(tid, resume("yes"), update({"item": "desk"}))
    assert resumed.status_code == 200, resumed.text
    assert updated.status_code == 409, updated.text  # as an update of any busy thread
    assert "is busy with run" in updated.json()["detail"]
    wait_run(run.id, statuses=("succeeded",))
    assert state()["values"] == {**ASKED, "approved": "yes"}  # none of the update
    assert edits(run) == []


def test_a_state_update_that_a_resume_moved_past_is_refused_and_writes_nothing(waiting):
    """The update is decided first, on the waiting checkpoint; the resume decided next
    answers the run, which goes on from that checkpoint: the update, written on it now,
    would be a branch the run never sees, so it is refused, and the resume holds."""
    tid, run, resume, update, state = waiting
    updated, resumed = race(tid, update({"item": "desk"}), resume("yes"))
    assert resumed.status_code == 200, resumed.text
    assert updated.status_code == 409, updated.text
    assert "moved on before its update was written" in updated.json()["detail"]
    wait_run(run.id, statuses=("succeeded",))
    assert state()["values"] == {**ASKED, "approved": "yes"}
    assert edits(run) == []
    assert [(i.answer, i.status) for i in run.interrupts.all()] == [
        ("yes", Interrupt.Status.ANSWERED)]


def test_of_two_racing_state_updates_one_is_written_and_the_other_refused(waiting):
    """Both decided on the waiting checkpoint: the one written first is written on it; the
    other, decided on a checkpoint that is no longer the thread's newest, is refused
    (written there it would be a branch beside the first's, which would be lost; written
    on the first's, a state it was never decided on). Which one writes first is the
    machine's to say."""
    tid, run, _, update, state = waiting
    updates = {"first": {"item": "desk"}, "second": {"quantity": 9}}
    first, second = race(tid, update(updates["first"]), update(updates["second"]))
    answers = {"first": first, "second": second}
    written = [n for n, r in answers.items() if r.status_code == 200]
    assert len(written) == 1, {n: r.text for n, r in answers.items()}
    [winner], [loser] = written, set(answers) - set(written)
    assert answers[loser].status_code == 409, answers[loser].text
    assert "moved on before its update was written: it was decided on checkpoint" in (
        answers[loser].json()["detail"])
    now = state()
    assert now["values"] == {**ASKED, **updates[winner]}
    assert now["checkpoint"]["checkpoint_id"] == answers[winner].json()["checkpoint_id"]
    assert edits(run) == [updates[winner]]
