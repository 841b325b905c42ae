"""``cancel?action=rollback`` of a resume or a continue, through the official SDK: as on
LangGraph's server, that LangGraph run alone goes, with its checkpoints, and the thread is
again where it stood before it (waiting at the question, or paused at the breakpoint);
the run before it, and the ``Run`` with its first questions' answers, stay."""

from __future__ import annotations

import time

import pytest
from langgraph_sdk.errors import NotFoundError

from dashboard.checkpoints import checkpoint_list
from dashboard.models import Interrupt, LangGraphRun, Run, RunEvent
from tests.conftest import assert_gapless

Kind = RunEvent.Kind

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


def _started(run_id: str, node: str) -> None:
    """Wait until ``node`` started in the LangGraph run ``run_id`` (a resume or a continue:
    its events are its Run's from its first seq)."""
    langgraph_run = LangGraphRun.objects.get(id=run_id)
    deadline = time.monotonic() + 30
    while not RunEvent.objects.filter(run_id=langgraph_run.run_id, node=node,
                                      kind=Kind.NODE_STARTED,
                                      seq__gte=langgraph_run.first_seq).exists():
        assert time.monotonic() < deadline, f"{node} never started"
        time.sleep(0.02)


def _gone(sdk, thread_id: str, run_id: str) -> None:
    """Wait until the LangGraph run is no longer listed (rolled back once it stopped)."""
    deadline = time.monotonic() + 30
    while run_id in [r["run_id"] for r in sdk.runs.list(thread_id)]:
        assert time.monotonic() < deadline, f"run {run_id} was never rolled back"
        time.sleep(0.05)


@pytest.mark.parametrize("wait", [False, True], ids=["by-its-executor", "waited-for"])
def test_a_resume_rolled_back_leaves_the_thread_waiting_at_its_question_again(sdk, wait):
    tid = sdk.threads.create()["thread_id"]
    asked = sdk.runs.wait(tid, "review", input={"item": "cup"})
    assert asked["__interrupt__"][0]["value"] == {"question": "Ship cup?"}
    (first,) = sdk.runs.list(tid)
    resume = sdk.runs.create(tid, "review", command={"resume": "after a while"})
    _started(resume["run_id"], "ship")  # answered: the question's node ran, the next sleeps
    sdk.runs.cancel(tid, resume["run_id"], action="rollback", wait=wait)
    _gone(sdk, tid, resume["run_id"])

    assert [r["run_id"] for r in sdk.runs.list(tid)] == [first["run_id"]]
    assert sdk.runs.get(tid, first["run_id"])["status"] == "interrupted"
    with pytest.raises(NotFoundError):
        sdk.runs.get(tid, resume["run_id"])
    assert sdk.threads.get(tid)["status"] == "interrupted"
    state = sdk.threads.get_state(tid)
    assert state["next"] == ["review"] and "answer" not in state["values"]
    assert [i["value"] for i in state["interrupts"]] == [{"question": "Ship cup?"}]
    run = Run.objects.get(id=first["run_id"])
    assert run.state == Run.State.INTERRUPTED and run.finished_at is None
    question = Interrupt.objects.get(run=run)  # open again: answerable anywhere
    assert (question.status, question.answer, question.taken_up_at) == (
        Interrupt.Status.PENDING, None, None)
    events = assert_gapless(run)  # its trace ends at the question again
    assert events[-1].kind == Kind.INTERRUPT_RAISED
    assert not {Kind.RUN_RESUMED, Kind.RUN_CANCELLED, Kind.INTERRUPT_ANSWERED} & {
        e.kind for e in events}
    assert not checkpoint_list(thread_id=tid, run_ids=[resume["run_id"]])

    final = sdk.runs.wait(tid, "review", command={"resume": "yes"})
    assert final == {"item": "cup", "answer": "yes", "done": "cup: yes"}  # the new answer
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert [e.kind for e in assert_gapless(run)].count(Kind.INTERRUPT_ANSWERED) == 1
    assert len(sdk.runs.list(tid)) == 2


def test_a_continue_rolled_back_leaves_the_thread_paused_at_its_breakpoint(sdk):
    tid = sdk.threads.create()["thread_id"]
    sdk.runs.wait(tid, "nap", input={"seconds": 60}, interrupt_before=["nap"])
    (first,) = sdk.runs.list(tid)
    assert sdk.threads.get_state(tid)["next"] == ["nap"]
    going_on = sdk.runs.create(tid, "nap", input=None)  # continue past the breakpoint
    _started(going_on["run_id"], "nap")
    sdk.runs.cancel(tid, going_on["run_id"], action="rollback", wait=True)
    _gone(sdk, tid, going_on["run_id"])

    assert [r["run_id"] for r in sdk.runs.list(tid)] == [first["run_id"]]
    assert sdk.runs.get(tid, first["run_id"])["status"] == "interrupted"
    assert sdk.threads.get(tid)["status"] == "interrupted"
    run = Run.objects.get(id=first["run_id"])
    assert run.state == Run.State.PAUSED
    assert assert_gapless(run)[-1].kind == Kind.RUN_PAUSED
    assert sdk.threads.get_state(tid)["next"] == ["nap"]
    sdk.threads.update_state(tid, {"seconds": 0})
    assert sdk.runs.wait(tid, "nap", input=None) == {"seconds": 0, "done": True}
    assert Run.objects.get(id=first["run_id"]).status == Run.Status.SUCCEEDED
