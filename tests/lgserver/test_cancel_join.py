"""Cancel and join as LangGraph's server answers them, through the official SDK: a run
neither pending nor running is not cancelled (404), ``wait`` answers once the run stopped,
``action=rollback`` deletes the run (the thread's state is what it was before),
joining a finished run answers its final values at once (and ``runs.get`` carries them
as Aegra's ``output``), its join stream ends with ``end``, and deleting a thread cancels
its runs in flight first."""

from __future__ import annotations

import time

import httpx
import pytest
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from dashboard.models import Interrupt, Run, RunEvent, Thread
from tests.conftest import wait_run

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


def running(sdk, thread_id: str, **input_) -> dict:
    run = sdk.runs.create(thread_id, "slow", input={"limit": 400, **input_})
    wait_run(run["run_id"], statuses=("running",))
    return run


def test_cancel_with_wait_answers_once_the_run_stopped(sdk):
    thread = sdk.threads.create()
    run = running(sdk, thread["thread_id"])
    deadline = time.monotonic() + 30
    while not RunEvent.objects.filter(run_id=run["run_id"],
                                      kind=RunEvent.Kind.NODE_FINISHED).exists():
        assert time.monotonic() < deadline, "no step completed"
        time.sleep(0.02)  # a step completed: its values are the run's last
    # as LangGraph's server: once stopped, the run's final values (as join answers them)
    answer = sdk.runs.cancel(thread["thread_id"], run["run_id"], wait=True)
    assert Run.objects.get(id=run["run_id"]).status == Run.Status.CANCELLED  # already
    assert answer == sdk.threads.get_state(thread["thread_id"])["values"]
    assert answer["count"] >= 1
    assert sdk.runs.get(thread["thread_id"], run["run_id"])["status"] == "interrupted"


def test_a_finished_or_waiting_run_is_not_cancelled_404(sdk):
    thread = sdk.threads.create()
    done = sdk.runs.create(thread["thread_id"], "slow", input={"limit": 1})
    sdk.runs.join(thread["thread_id"], done["run_id"])
    with pytest.raises(NotFoundError, match="neither pending nor running"):
        sdk.runs.cancel(thread["thread_id"], done["run_id"])
    assert Run.objects.get(id=done["run_id"]).status == Run.Status.SUCCEEDED
    asking = sdk.threads.create()
    sdk.runs.wait(asking["thread_id"], "orders", input={"item": "cup"})
    (waiting,) = sdk.runs.list(asking["thread_id"])
    with pytest.raises(NotFoundError):
        sdk.runs.cancel(asking["thread_id"], waiting["run_id"])
    with pytest.raises(httpx.HTTPStatusError, match="404"):  # with wait, httpx's own error
        sdk.runs.cancel(asking["thread_id"], waiting["run_id"], wait=True)
    assert Interrupt.objects.get(run_id=waiting["run_id"]).status == Interrupt.Status.PENDING


def test_rollback_deletes_the_run_and_the_thread_is_as_before(sdk):
    thread = sdk.threads.create()
    tid = thread["thread_id"]
    first = sdk.runs.wait(tid, "slow", input={"limit": 2})
    assert first == {"count": 2, "limit": 2}
    second = running(sdk, tid)
    sdk.runs.cancel(tid, second["run_id"], wait=True, action="rollback")
    assert not Run.objects.filter(id=second["run_id"]).exists()
    assert sdk.threads.get_state(tid)["values"] == {"count": 2, "limit": 2}
    assert len(sdk.runs.list(tid)) == 1
    third = running(sdk, tid)
    sdk.runs.cancel(tid, third["run_id"], action="rollback")  # deleted once it stops
    end = time.monotonic() + 30
    while Run.objects.filter(id=third["run_id"]).exists() and time.monotonic() < end:
        time.sleep(0.05)
    assert not Run.objects.filter(id=third["run_id"]).exists()


def test_a_bad_action_or_wait_is_422_naming_it(sdk, lg_url, sdk_user):
    from tests.conftest import api_token

    thread = sdk.threads.create()
    run = running(sdk, thread["thread_id"])
    with pytest.raises(UnprocessableEntityError, match="action"):
        sdk.runs.cancel(thread["thread_id"], run["run_id"], action="explode")
    answer = httpx.post(f"{lg_url}/threads/{thread['thread_id']}/runs/{run['run_id']}/cancel",
                        params={"wait": "soon"}, headers={"x-api-key": api_token(sdk_user)})
    assert answer.status_code == 422 and "wait" in answer.text
    assert Run.objects.get(id=run["run_id"]).status == Run.Status.RUNNING  # untouched
    sdk.runs.cancel(thread["thread_id"], run["run_id"], wait=True)


def test_join_of_a_finished_run_answers_its_final_values_at_once(sdk):
    thread = sdk.threads.create()
    run = sdk.runs.create(thread["thread_id"], "slow", input={"limit": 2})
    assert sdk.runs.join(thread["thread_id"], run["run_id"]) == {"count": 2, "limit": 2}
    assert sdk.runs.join(thread["thread_id"], run["run_id"]) == {"count": 2, "limit": 2}
    parts = list(sdk.runs.join_stream(thread["thread_id"], run["run_id"]))
    # nothing of the run after it (it ended): the end that says so, and how it ended
    assert [p.event for p in parts] == ["metadata", "end"]
    assert parts[-1].data == {"run_id": run["run_id"], "status": "success"}
    cancelled = running(sdk, thread["thread_id"], count=0)
    # cancelled once it made progress (a cancel before its first step would leave the
    # thread's values as the run before it left them, as LangGraph's server does)
    for _ in range(600):
        if RunEvent.objects.filter(run_id=cancelled["run_id"],
                                   kind=RunEvent.Kind.NODE_FINISHED).exists():
            break
        time.sleep(0.05)
    sdk.runs.cancel(thread["thread_id"], cancelled["run_id"], wait=True)
    values = sdk.runs.join(thread["thread_id"], cancelled["run_id"])
    assert values["limit"] == 400 and values["count"] >= 1


def test_a_run_carries_its_output_once_it_stopped_what_join_answers(sdk):
    """Aegra's ``output`` on ``runs.get``: null while the run goes on, then its final
    values, the same as ``join`` answers (a waiting run's with its interrupt)."""
    thread = sdk.threads.create()
    run = running(sdk, thread["thread_id"], limit=30)
    assert sdk.runs.get(thread["thread_id"], run["run_id"])["output"] is None
    joined = sdk.runs.join(thread["thread_id"], run["run_id"])
    assert joined == {"count": 30, "limit": 30}
    assert sdk.runs.get(thread["thread_id"], run["run_id"])["output"] == joined
    asked = sdk.threads.create()
    waiting = sdk.runs.create(asked["thread_id"], "orders", input={"item": "pen"})
    joined = sdk.runs.join(asked["thread_id"], waiting["run_id"])
    output = sdk.runs.get(asked["thread_id"], waiting["run_id"])["output"]
    assert output == joined and output["__interrupt__"][0]["value"] == {
        "question": "Approve 1 x pen?"}


def test_deleting_a_thread_cancels_its_runs_in_flight_then_deletes_it(sdk):
    """As LangGraph's server: a thread whose run executes (and one is enqueued behind it)
    is deleted, its runs cancelled first (at their next node boundary)."""
    tid = sdk.threads.create()["thread_id"]
    first = running(sdk, tid)
    queued = sdk.runs.create(tid, "slow", input={"limit": 2})  # enqueued: none named
    assert queued["status"] == "pending"
    sdk.threads.delete(tid)
    assert not Thread.objects.filter(id=tid).exists()
    assert not Run.objects.filter(id__in=[first["run_id"], queued["run_id"]]).exists()
    with pytest.raises(NotFoundError, match=f"thread {tid} not found"):
        sdk.threads.get(tid)


def test_cancel_many_cancels_the_named_runs_or_all_of_a_status_of_the_users_own(
        sdk, lg_url, django_user_model):
    """``runs.cancel_many``: by thread and run ids, or every run of the caller's so; another
    user's run is not touched; nothing pending or running is 404; bad input 422."""
    from django.contrib.auth.models import Permission
    from langgraph_sdk import get_sync_client

    from tests.conftest import api_token
    from tests.lgserver.conftest import PERMS

    other = django_user_model.objects.create_user(username="otto", password="pw-otto-12345")
    other.user_permissions.set(Permission.objects.filter(codename__in=PERMS))
    others = get_sync_client(url=lg_url, api_key=api_token(other))
    theirs = running(others, others.threads.create()["thread_id"])
    one, two = (sdk.threads.create()["thread_id"] for _ in range(2))
    first, second = running(sdk, one), running(sdk, two)
    sdk.runs.cancel_many(thread_id=one, run_ids=[first["run_id"]])
    wait_run(first["run_id"], statuses=("cancelled",))
    assert Run.objects.get(id=second["run_id"]).status == Run.Status.RUNNING
    with pytest.raises(NotFoundError, match="none of the runs named"):
        sdk.runs.cancel_many(thread_id=one, run_ids=[first["run_id"]])
    with pytest.raises(NotFoundError):  # another's run, named: not theirs to cancel
        sdk.runs.cancel_many(thread_id=theirs["thread_id"], run_ids=[theirs["run_id"]])
    sdk.runs.cancel_many(status="all")
    wait_run(second["run_id"], statuses=("cancelled",))
    assert Run.objects.get(id=theirs["run_id"]).status == Run.Status.RUNNING
    for bad, field in (({"status": "sleeping"}, "status"),
                       ({"status": "all", "thread_id": one}, "status"),
                       ({"thread_id": one}, "run_ids"),
                       ({"thread_id": one, "run_ids": ["x"]}, "run_ids")):
        with pytest.raises(UnprocessableEntityError, match=field):
            sdk.http.post("/runs/cancel", json=bad)
    with pytest.raises(UnprocessableEntityError, match="action"):
        sdk.runs.cancel_many(status="all", action="explode")
    others.runs.cancel_many(thread_id=theirs["thread_id"], run_ids=[theirs["run_id"]],
                            action="rollback")
    end = time.monotonic() + 30
    while Run.objects.filter(id=theirs["run_id"]).exists() and time.monotonic() < end:
        time.sleep(0.05)
    assert not Run.objects.filter(id=theirs["run_id"]).exists()


def test_a_cancel_stops_the_node_in_flight_and_nothing_follows_it(sdk):
    """As LangGraph's server cancels a run's task: the run reads ``interrupted`` at once
    (polled, bounded), its node in flight never finishes, the thread keeps the checkpoint
    of its last completed step, and nothing is written after the cancel, not even once
    the node would have ended."""
    thread_id = sdk.threads.create()["thread_id"]
    run_id = sdk.runs.create(thread_id, "nap", input={"seconds": 3})["run_id"]
    wait_run(run_id, statuses=("running",))
    began = time.monotonic()
    while not RunEvent.objects.filter(run_id=run_id, kind=RunEvent.Kind.NODE_STARTED).exists():
        assert time.monotonic() - began < 10, "the nap never started"
        time.sleep(0.02)
    answer = sdk.runs.cancel(thread_id, run_id)
    assert answer["run_id"] == run_id  # the run, as runs.get answers it (a superset of 202)
    deadline = time.monotonic() + 10
    while sdk.runs.get(thread_id, run_id)["status"] != "interrupted":
        assert time.monotonic() < deadline, "the cancelled run never read interrupted"
        time.sleep(0.05)
    events = list(RunEvent.objects.filter(run_id=run_id).order_by("seq"))
    assert events[-1].kind == RunEvent.Kind.RUN_CANCELLED and events[-1].node == "nap"
    assert RunEvent.Kind.NODE_FINISHED not in [e.kind for e in events]
    state = sdk.threads.get_state(thread_id)  # the step before the nap: it is still next
    assert state["next"] == ["nap"] and "done" not in state["values"]
    time.sleep(max(0.0, began + 3.5 - time.monotonic()))  # past the nap's own end
    assert sdk.runs.get(thread_id, run_id)["status"] == "interrupted"
    assert RunEvent.objects.filter(run_id=run_id).count() == len(events)
    assert list(sdk.runs.join_stream(thread_id, run_id)) is not None  # the stream ends
