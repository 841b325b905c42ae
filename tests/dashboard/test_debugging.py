"""Breakpoints, stepping and forks through the run service (real executor and savers)."""

from __future__ import annotations

import time

import pytest

from dashboard import services
from dashboard.models import Run, RunEvent
from tests.conftest import assert_gapless, wait_run

pytestmark = pytest.mark.pg

Kind = RunEvent.Kind
PAUSED = ("paused", "succeeded", "failed", "cancelled")
DONE = ("succeeded", "failed", "cancelled")


def finished_nodes(run: Run) -> list[str]:
    return list(run.events.filter(kind=Kind.NODE_FINISHED, namespace="")
                .order_by("seq").values_list("node", flat=True))


def test_a_run_pauses_before_a_node_and_continues_without_running_anything_twice(
        executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 3}, user=operator,
                              options=services.RunOptions(interrupt_before=["done"]))
    run = wait_run(run.id, statuses=PAUSED)
    assert run.status == Run.Status.PAUSED and run.current_node == "done"
    paused = run.events.get(kind=Kind.RUN_PAUSED)
    assert paused.payload == {"before": ["done"], "after": ""}
    assert finished_nodes(run) == ["step", "step", "step"]
    assert run.output is None and run.owner == ""

    services.run_continue(run=run, user=operator)
    run = wait_run(run.id, statuses=DONE)
    assert run.status == Run.Status.SUCCEEDED and run.output == {"n": 3, "answer": None}
    assert finished_nodes(run) == ["step", "step", "step", "done"]
    events = assert_gapless(run)
    continued = next(e for e in events if e.kind == Kind.RUN_CONTINUED)
    assert continued.payload == {"by": "olga", "step": False}


def test_stepping_runs_one_super_step_then_pauses_again(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 4}, user=operator,
                              options=services.RunOptions(interrupt_before=["step"]))
    run = wait_run(run.id, statuses=PAUSED)
    assert run.status == Run.Status.PAUSED and finished_nodes(run) == []
    # no breakpoint left: only the step itself may pause the run again
    services.run_breakpoints_set(run=run, interrupt_before=[], interrupt_after=[],
                                 user=operator)
    for expected in (1, 2):
        services.run_continue(run=run, user=operator, step=True)
        deadline = time.monotonic() + 30
        while len(finished_nodes(run)) < expected or \
                Run.objects.get(id=run.id).status != Run.Status.PAUSED:
            assert time.monotonic() < deadline, "the step did not pause again"
            time.sleep(0.05)
        run.refresh_from_db()
        assert finished_nodes(run) == ["step"] * expected
        assert run.events.filter(kind=Kind.RUN_PAUSED).order_by("-seq").first().payload[
            "after"] == "step"
        assert run.step_once is False
    services.run_continue(run=run, user=operator)
    run = wait_run(run.id, statuses=DONE)
    assert run.output == {"n": 4, "answer": None}
    changed = run.events.filter(kind=Kind.BREAKPOINTS_CHANGED).get()
    assert changed.payload == {"by": "olga", "before": [], "after": []}
    assert_gapless(run)


def test_breakpoints_set_on_a_running_run_take_effect_at_the_next_boundary(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 6, "delay": 0.15},
                              user=operator)
    deadline = time.monotonic() + 30
    while not finished_nodes(run):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    services.run_breakpoints_set(run=run, interrupt_before=["done"], interrupt_after=[],
                                 user=operator)
    run = wait_run(run.id, statuses=PAUSED)
    assert run.status == Run.Status.PAUSED and run.current_node == "done"
    assert run.events.filter(kind=Kind.BREAKPOINTS_CHANGED).get().payload["before"] == ["done"]
    assert finished_nodes(run) == ["step"] * 6  # no step ran twice across the restart
    services.run_continue(run=run, user=operator)
    run = wait_run(run.id, statuses=DONE)
    assert run.status == Run.Status.SUCCEEDED
    assert_gapless(run)


def test_a_fork_starts_from_a_past_checkpoint_with_an_edit_and_leaves_its_parent_alone(
        executor, operator):
    parent = wait_run(services.run_create(graph="test.echo", input={"steps": 3},
                                          user=operator).id)
    assert parent.output == {"n": 3, "answer": None}
    before_done = parent.events.filter(kind=Kind.CHECKPOINT, namespace="",
                                       payload__next=["done"]).get()
    child = services.run_fork(run=parent, checkpoint_id=before_done.checkpoint_id,
                              user=operator, values={"n": 40}, as_node="step")
    child = wait_run(child.id, statuses=DONE)
    assert child.status == Run.Status.SUCCEEDED and child.output == {"n": 40, "answer": None}
    assert (child.parent_id, child.forked_from_checkpoint) == (parent.id,
                                                              before_done.checkpoint_id)
    first = assert_gapless(child)[0]
    assert first.kind == Kind.RUN_FORKED
    assert first.payload["parent"] == str(parent.id)
    assert first.payload["edit"] == {"values": {"n": 40}, "as_node": "step"}
    assert finished_nodes(child) == ["done"]  # the steps before the fork are not re-run
    parent.refresh_from_db()
    assert parent.output == {"n": 3, "answer": None}
    assert list(parent.forks.all()) == [child]


def test_a_fork_without_an_edit_reruns_from_the_checkpoint(executor, operator):
    parent = wait_run(services.run_create(graph="test.echo", input={"steps": 2},
                                          user=operator).id)
    first_cp = parent.events.filter(kind=Kind.CHECKPOINT, namespace="").order_by("seq")[1]
    child = wait_run(services.run_fork(run=parent, checkpoint_id=first_cp.checkpoint_id,
                                       user=operator).id, statuses=DONE)
    assert child.output == parent.output


@pytest.mark.parametrize(("values", "as_node", "field", "message"), [
    ({"nope": 1}, "step", "nope", "the graph has no channel 'nope'; its channels:"),
    ({"n": "many"}, "step", "n", "'many' does not fit int"),
    ({"n": 1}, "jump", "as_node", "the graph has no node 'jump'; its nodes:"),
    ([], "", "values", "give an object of channel names"),
])
def test_a_bad_edit_is_refused_naming_the_field_and_nothing_is_written(
        executor, operator, values, as_node, field, message):
    parent = wait_run(services.run_create(graph="test.echo", input={"steps": 1},
                                          user=operator).id)
    checkpoint = parent.events.filter(kind=Kind.CHECKPOINT).first().checkpoint_id
    runs = Run.objects.count()
    with pytest.raises(services.DebugInputError) as refused:
        services.run_fork(run=parent, checkpoint_id=checkpoint, user=operator,
                          values=values, as_node=as_node)
    assert message in refused.value.errors[field]
    assert Run.objects.count() == runs


def test_unknown_breakpoints_and_checkpoints_are_refused(executor, operator):
    with pytest.raises(services.DebugInputError, match="no node 'decide'"):
        services.run_create(graph="test.echo", input={}, user=operator,
                            options=services.RunOptions(interrupt_before=["decide"]))
    assert Run.objects.count() == 0
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 1},
                                       user=operator).id)
    with pytest.raises(services.DebugInputError, match="has no checkpoint 'abc'"):
        services.run_fork(run=run, checkpoint_id="abc", user=operator)
    with pytest.raises(services.RunStateError, match="not paused"):
        services.run_continue(run=run, user=operator)


def test_the_api_sets_breakpoints_continues_and_forks_with_its_own_permissions(
        executor, operator, client):
    from django.contrib.auth.models import Permission

    client.force_login(operator)
    started = client.post("/api/runs/", {"graph": "test.echo", "input": {"steps": 2},
                                         "interrupt_before": ["done"]},
                          content_type="application/json")
    assert started.status_code == 201, started.content
    run_id = started.json()["id"]
    assert started.json()["interrupt_before"] == ["done"]
    run = wait_run(run_id, statuses=PAUSED)
    assert run.status == "paused"
    denied = client.post(f"/api/runs/{run_id}/continue/", {}, content_type="application/json")
    assert denied.status_code == 403 and "dashboard.debug_run" in denied.json()["detail"]
    operator.user_permissions.add(*Permission.objects.filter(
        codename__in=["debug_run", "fork_run"]))
    bad = client.post(f"/api/runs/{run_id}/breakpoints/", {"interrupt_after": ["nope"]},
                      content_type="application/json")
    assert bad.status_code == 400 and "no node 'nope'" in bad.json()["errors"]["interrupt_after"]
    assert client.post(f"/api/runs/{run_id}/continue/", {"step": False},
                       content_type="application/json").status_code == 200
    run = wait_run(run_id, statuses=DONE)
    checkpoint = run.events.filter(kind=Kind.CHECKPOINT, namespace="",
                                   payload__next=["done"]).get().checkpoint_id
    forked = client.post(f"/api/runs/{run_id}/fork/", {
        "checkpoint_id": checkpoint, "values": {"n": 7}, "as_node": "step"},
        content_type="application/json")
    assert forked.status_code == 201, forked.content
    assert forked.json()["parent"] == run_id
    assert wait_run(forked.json()["id"], statuses=DONE).output == {"n": 7, "answer": None}
    wrong = client.post(f"/api/runs/{run_id}/fork/", {
        "checkpoint_id": checkpoint, "values": {"n": "x"}}, content_type="application/json")
    assert wrong.status_code == 400 and "does not fit int" in wrong.json()["errors"]["n"]
