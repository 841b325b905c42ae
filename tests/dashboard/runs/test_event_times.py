"""Every event carries when its thing happened: a child span lies inside its parent, the
steps of a chain keep their order, and every span starts before it ends (on recorded runs
of both built-in graphs and of a ``langgraph.json`` graph)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from itertools import pairwise
from typing import Any

import pytest

from dashboard import services
from dashboard.models import Run, RunEvent
from dashboard.runs.record import event_dict
from dashboard.web.presentation.waterfall import WaterfallFold
from tests.conftest import assert_gapless, wait_run

pytestmark = pytest.mark.pg

Kind = RunEvent.Kind
ENDS = (Kind.NODE_FINISHED, Kind.NODE_FAILED, Kind.INTERRUPT_RAISED)


def _executions(events: list[RunEvent]) -> list[dict[str, Any]]:
    """Each node execution (a task run once; a resumed task runs again) with its times."""
    out, running = [], {}
    for e in events:
        if e.kind == Kind.NODE_STARTED:
            running[e.task_id] = {"task": e.task_id, "ns": e.namespace, "step": e.step,
                                  "node": e.node, "start": e.at, "end": None}
            out.append(running[e.task_id])
        elif e.kind in ENDS and e.task_id in running:
            running.pop(e.task_id)["end"] = e.at
    return out


def _around(executions: list[dict[str, Any]], task: str, at: datetime) -> dict[str, Any]:
    """The execution of ``task`` that was running at ``at`` (the last one begun by then)."""
    begun = [x for x in executions if x["task"] == task and x["start"] <= at]
    assert begun, f"nothing of task {task} had begun at {at}: {executions}"
    return begun[-1]


def assert_true_times(run: Run) -> None:
    """The properties every recorded run keeps, on its events and on its waterfall."""
    events = assert_gapless(run)
    executions = _executions(events)
    assert executions, "the run executed no node"
    for x in executions:
        assert x["end"] is not None and x["start"] <= x["end"], x
        if x["ns"]:  # a subgraph's task lies inside the task that ran the subgraph
            parent = _around(executions, x["ns"].split("|")[-1].rpartition(":")[2],
                             x["start"])
            assert parent["start"] <= x["start"] and x["end"] <= parent["end"], (x, parent)
    started = {e.payload["call_id"]: e for e in events if e.kind == Kind.MODEL_STARTED}
    for done in (e for e in events if e.kind == Kind.MODEL_FINISHED):
        begun = started[done.payload["call_id"]]
        assert begun.at <= done.at
        parent = _around(executions, done.task_id, begun.at)
        assert parent["start"] <= begun.at and done.at <= parent["end"], (
            f"model call {begun.at}..{done.at} outside {parent}")
    steps: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for x in executions:
        if not x["ns"]:
            steps[x["step"]].append(x)
    order = sorted(steps)
    for before, after in pairwise(order):
        # the steps of the root chain follow one another; the tasks of one step (a fan-out)
        # may overlap each other
        assert max(x["end"] for x in steps[before]) <= min(
            x["start"] for x in steps[after]), (steps[before], steps[after])
    fold = WaterfallFold()
    for e in events:
        fold.add(event_dict(e))
    drawn: dict[int, list[Any]] = defaultdict(list)
    for item in fold.items:
        assert item.end is not None and item.start <= item.end, item
        for child in item.children:
            assert item.start <= child.start <= child.end <= item.end, (item, child)
        if item.kind != "human" and not item.namespace:
            drawn[item.step].append(item)
    order = sorted(drawn)
    for before, after in pairwise(order):
        assert max(b.end for b in drawn[before]) <= min(b.start for b in drawn[after]), (
            drawn[before], drawn[after])


@pytest.fixture
def batched(executor, settings):
    """The executor writing its events in batches 0.1 s apart (as under load), its model
    thinking 5 ms a call: the times a row is written are far from when things happened."""
    from dashboard.runs.dispatch import get_executor, reset_executor

    settings.PLANWATCH = {**settings.PLANWATCH, "THINK_TIME": 0.005,
                          "EVENT_WRITE_INTERVAL": 0.1}
    reset_executor()
    yield get_executor()
    reset_executor()


ANSWERS = {"core.region": "Germany", "core.currency": "EUR", "market.price": 47.88}


def _to_the_end(run: Run, operator: Any) -> Run:
    """Answer each question of the run as it comes."""
    while True:
        run = wait_run(run.id)
        if run.status != Run.Status.INTERRUPTED:
            return run
        for question in run.interrupts.filter(status="pending"):
            field = (question.payload or {}).get("field")
            services.interrupt_answer(interrupt=question, answer=ANSWERS[field], user=operator)


def test_acquisition_events_carry_when_they_happened(batched, operator):
    run = _to_the_end(services.run_create(
        graph="acquisition", input={}, user=operator), operator)
    assert run.status == Run.Status.SUCCEEDED and run.model_calls >= 2
    assert run.events.filter(kind=Kind.INTERRUPT_ANSWERED).count() == 3
    assert_true_times(run)


def test_decomposition_events_carry_when_they_happened(batched, operator):
    run = _to_the_end(services.run_create(graph="decomposition", input={"breadth": 3},
                                          user=operator), operator)
    assert run.status == Run.Status.SUCCEEDED
    assert_true_times(run)


def test_a_langgraph_json_graph_s_events_carry_when_they_happened(
        batched, operator, openai_server, chat_graph):
    run = wait_run(services.run_create(graph=chat_graph, input={"messages": [
        {"role": "user", "content": "hello"}]}, user=operator).id)
    assert run.status == Run.Status.SUCCEEDED and run.model_calls == 2
    assert_true_times(run)
