"""F02's judgement calls (seed 004) that the round loop in :mod:`.graph` makes.

- **Preconditions at planning time**: a ready task is dispatched only when its worker is
  registered, its slot inputs resolve and its worker's preconditions hold on the data
  available now; otherwise it fails in ``plan`` and never reaches ``work``.
- **Partial success**: a task that failed for good is offered to the planner, which may
  accept the run going on without it (``accepted``); an accepted failure unblocks its
  dependents and does not fail its parent or the run.
- **Tone**: a worker's output says how sure it is (``tone``, or hedging words in its
  text); an uncertain result is put to the planner like a failure, which may redo it with
  a new sub-goal.
- **synthesis_inputs**: the done-decision names the output slots the synthesis uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from planner.decomposition.tasks import ROOT_ID, is_terminal_node
from planner.decomposition.workers import (
    WorkContext,
    Worker,
    WorkerError,
    check_preconditions,
    resolve_inputs,
)
from planner.llm import LLMError, LLMPort
from planner.search import SearchPort

CONFIDENT = "confident"
UNCERTAIN = "uncertain"
TONES: tuple[str, ...] = (CONFIDENT, UNCERTAIN)
HEDGES: tuple[str, ...] = ("not sure", "uncertain", "unclear", "cannot confirm", "unverified")
"""Words that make a worker's text uncertain when it states no ``tone`` itself."""


class SlotRef(BaseModel):
    """F02's reference to one output slot of a finished task."""

    from_sub_goal: str
    slot: str


class DoneDecision(BaseModel):
    """F02's ``done``: which task outputs the synthesis (F14) reads, and why."""

    synthesis_inputs: dict[str, SlotRef]
    reasoning: str = ""


class AcceptDecision(BaseModel):
    """F02's partial-success call on a task that failed for good."""

    accept: bool
    reasoning: str = ""


def dispatch_problem(
    task: Mapping[str, Any],
    *,
    registry: Mapping[str, Worker],
    tasks: Mapping[str, Mapping[str, Any]],
    run_goal: str,
    llm: LLMPort,
    search: SearchPort | None,
) -> WorkerError | None:
    """Why ``task`` cannot be dispatched now (unknown worker, input, precondition), or None."""
    name = task["worker"] or task["task_type"]
    worker = registry.get(name)
    if worker is None:
        return WorkerError(
            f"unknown worker {name!r} for task {task['id']}; "
            f"registered workers: {', '.join(sorted(registry))}",
            kind="unknown_worker",
        )
    dep_results = {d: tasks[d]["result"] for d in task["deps"]}
    try:
        inputs = resolve_inputs(task, dep_results)
        check_preconditions(worker, WorkContext(task=task, inputs=inputs, dep_results=dep_results,
                                                run_goal=run_goal, llm=llm, search=search))
    except WorkerError as exc:
        return exc
    return None


def tone_of(result: Any) -> str:
    """``confident`` or ``uncertain``: the result's own ``tone``, else its text's hedging."""
    if not isinstance(result, Mapping):
        return CONFIDENT
    tone = result.get("tone")
    if tone in TONES:
        return str(tone)
    text = str(result.get("text") or "").lower()
    return UNCERTAIN if any(h in text for h in HEDGES) else CONFIDENT


async def aaccept_decision(
    *, llm: LLMPort, task: Mapping[str, Any], run_goal: str
) -> AcceptDecision:
    """Ask the planner whether the run may go on without the failed ``task``."""
    try:
        return await llm.astructured(
            purpose="decomposition.accept",
            prompt=(f"Task {task['goal']!r} failed for good: {task['error']}. Is the result "
                    f"acceptable without it for: {run_goal}?"),
            schema=AcceptDecision,
            context={"task_id": task["id"], "goal": task["goal"], "error": task["error"],
                     "error_kind": task["error_kind"], "run_goal": run_goal},
        )
    except LLMError as exc:
        return AcceptDecision(accept=False, reasoning=f"acceptance decision failed: {exc}")


def finished_outputs(tasks: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``ok`` tasks with named output slots, as the done-decision is shown them."""
    return [
        {"id": t["id"], "goal": t["goal"], "task_type": t["task_type"], "worker": t["worker"],
         "parent": t["parent"], "atomic": t["atomic"], "slots": sorted(t["result"])}
        for t in tasks.values()
        if t["status"] == "ok" and t["id"] != ROOT_ID and isinstance(t["result"], Mapping)
        and not is_terminal_node(t)
    ]


async def adone_decision(
    *, llm: LLMPort, tasks: Mapping[str, Mapping[str, Any]], run_goal: str
) -> dict[str, Any]:
    """F02's done-decision: the usable ``synthesis_inputs``, what was dropped, the reasoning.

    A reference to a task that is not ``ok`` or to a slot it does not have is dropped and
    named; when nothing usable is left (or the model fails) ``synthesis_inputs`` is None and
    the synthesis falls back to every finished atomic task.
    """
    outputs = finished_outputs(tasks)
    try:
        answer = await llm.astructured(
            purpose="decomposition.done",
            prompt=(f"Every task for {run_goal!r} is finished. Name the output slots the "
                    "synthesis should use as {name: {from_sub_goal, slot}}."),
            schema=DoneDecision,
            context={"run_goal": run_goal, "outputs": outputs},
        )
    except LLMError as exc:
        return {"synthesis_inputs": None, "dropped": [],
                "reasoning": f"done-decision failed: {exc}; using every finished task"}
    usable: dict[str, dict[str, str]] = {}
    dropped: list[str] = []
    for name, ref in answer.synthesis_inputs.items():
        task = tasks.get(ref.from_sub_goal)
        if task is None or task["status"] != "ok":
            dropped.append(f"{name}: task {ref.from_sub_goal!r} has not finished ok")
        elif not isinstance(task["result"], Mapping) or ref.slot not in task["result"]:
            dropped.append(f"{name}: task {ref.from_sub_goal!r} has no slot {ref.slot!r}")
        else:
            usable[name] = {"from_sub_goal": ref.from_sub_goal, "slot": ref.slot}
    return {"synthesis_inputs": usable or None, "dropped": dropped,
            "reasoning": answer.reasoning}


def synthesis_results(
    tasks: Mapping[str, Mapping[str, Any]], refs: Mapping[str, Mapping[str, str]] | None
) -> list[dict[str, Any]]:
    """What the synthesis reads: the named slots, else every finished atomic task's text."""
    if refs:
        return [
            {"id": ref["from_sub_goal"], "name": name, "slot": ref["slot"],
             "goal": tasks[ref["from_sub_goal"]]["goal"],
             "text": tasks[ref["from_sub_goal"]]["result"][ref["slot"]]}
            for name, ref in refs.items()
        ]
    return [
        {"id": t["id"], "goal": t["goal"],
         "text": t["result"].get("text") if isinstance(t["result"], Mapping) else t["result"]}
        for t in tasks.values()
        if t["atomic"] and t["status"] == "ok" and not is_terminal_node(t)
    ]
