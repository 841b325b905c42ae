"""Two resumes of one waiting thread, each with its ``Command(update=…)``, racing.

A connection of the test's own holds the thread's row (as a request deciding holds it,
``thread_runs.locked``) until both requests wait on it (``tests.support.racing``), so
both reach the decision before either is decided, whatever the machine's speed. Exactly
one is applied; the checkpoint then holds its update only: a request that loses writes
nothing.
"""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import api_token, wait_run
from tests.support.racing import race, waiting_thread

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True), pytest.mark.server]

# each resume's update (the second's names two channels, so some of it would survive a
# clash with the first's), and the state the graph ends in if that resume is the one applied
RESUMES = {
    "first": ({"item": "first desk"}, {"item": "first desk", "quantity": 1,
                                       "approved": "first"}),
    "second": ({"item": "second desk", "quantity": 7}, {"item": "second desk", "quantity": 7,
                                                        "approved": "second"}),
}


def test_of_two_racing_resumes_with_updates_only_the_winners_update_is_applied(
        lg_url, sdk_user):
    headers = {"x-api-key": api_token(sdk_user)}
    tid, run = waiting_thread(lg_url, headers)

    def resume(name: str) -> httpx.Response:
        return httpx.post(f"{lg_url}/threads/{tid}/runs", headers=headers, timeout=60, json={
            "assistant_id": "orders",
            "command": {"resume": name, "update": RESUMES[name][0]}})

    first, second = race(tid, lambda: resume("first"), lambda: resume("second"))
    answers = {"first": first, "second": second}

    applied = [n for n, r in answers.items() if r.status_code == 200]
    assert len(applied) == 1, {n: r.text for n, r in answers.items()}
    [winner], [loser] = applied, set(answers) - set(applied)
    wait_run(run.id, statuses=("succeeded",))
    state = httpx.get(f"{lg_url}/threads/{tid}/state", headers=headers).json()
    assert state["values"] == RESUMES[winner][1]  # the winner's update, none of the loser's
    run.refresh_from_db()
    assert [(i.answer, i.status) for i in run.interrupts.all()] == [(winner, "answered")]
    # the loser is told the thread no longer waits, as a resume of any such thread is
    assert answers[loser].status_code == 409, answers[loser].text
    assert "answered already, not waiting for an answer" in answers[loser].json()["detail"]
