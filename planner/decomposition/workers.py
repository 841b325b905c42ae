"""The worker registry (F02's WORKER_REGISTRY): what an atomic task can be run by.

A worker has a name, preconditions checked before it runs, and an async ``run``. A task
names its worker (its WriteHERE ``task_type`` or its forge-lcdl ``task_id``); an unknown
worker or an unmet precondition fails that task, not the run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from langgraph.types import interrupt
from pydantic import BaseModel

from planner.decomposition.dag import slot_refs
from planner.llm import LLMPort
from planner.search import SearchPort

CLARIFY = "clarify"
"""The worker that asks the operator (its questions and answers join the transcript)."""
CLARIFY_MAX_ATTEMPTS = 3


class WorkerError(Exception):
    """A worker could not do its task; ``kind`` says why (worker, precondition, input …)."""

    def __init__(self, message: str, *, kind: str = "worker") -> None:
        self.kind = kind
        super().__init__(message)


@dataclass(frozen=True)
class WorkContext:
    """What a worker sees: its task, resolved inputs, dependency results and the ports."""

    task: Mapping[str, Any]
    inputs: Mapping[str, Any]
    dep_results: Mapping[str, Any]
    run_goal: str
    llm: LLMPort
    search: SearchPort | None

    def llm_context(self) -> dict[str, Any]:
        """The plain facts an LLM call gets (the scripted model answers from these)."""
        texts = {
            dep: res.get("text") if isinstance(res, Mapping) else res
            for dep, res in self.dep_results.items()
        }
        return {
            "task_id": self.task["id"],
            "goal": self.task["goal"],
            "task_type": self.task["task_type"],
            "inputs": dict(self.inputs),
            "dependencies": texts,
            "run_goal": self.run_goal,
        }


@dataclass(frozen=True)
class Precondition:
    """A named check a worker needs to hold before it runs."""

    description: str
    check: Callable[[WorkContext], bool]


@dataclass(frozen=True)
class Worker:
    """A registered worker: name, purpose, preconditions and the coroutine that runs it."""

    name: str
    description: str
    run: Callable[[WorkContext], Awaitable[Any]]
    preconditions: tuple[Precondition, ...] = field(default=())


def resolve_inputs(task: Mapping[str, Any], dep_results: Mapping[str, Any]) -> dict[str, Any]:
    """Replace ``{"from_sub_goal": id, "slot": name}`` inputs by that task's output slot."""
    inputs = dict(task.get("input") or {})
    for name, ref in slot_refs(inputs):
        source, slot = str(ref["from_sub_goal"]), str(ref["slot"])
        result = dep_results.get(source)
        if not isinstance(result, Mapping) or slot not in result:
            have = ", ".join(sorted(result)) if isinstance(result, Mapping) else "none"
            raise WorkerError(
                f"input {name!r} wants slot {slot!r} of task {source!r}, which has slots: {have}",
                kind="input",
            )
        inputs[name] = result[slot]
    return inputs


def check_preconditions(worker: Worker, ctx: WorkContext) -> None:
    """Raise ``WorkerError`` naming the first precondition of ``worker`` that fails."""
    for pre in worker.preconditions:
        if not pre.check(ctx):
            raise WorkerError(
                f"precondition of worker {worker.name!r} not met: {pre.description}",
                kind="precondition",
            )


# --- the built-in workers ------------------------------------------------------------------


def _query(ctx: WorkContext) -> str:
    return str(ctx.inputs.get("query") or ctx.task["goal"]).strip()


async def _search(ctx: WorkContext) -> dict[str, Any]:
    assert ctx.search is not None  # guaranteed by the precondition
    query = _query(ctx)
    hits = await ctx.search.asearch(query)
    if not hits:  # nothing found is a failed search, not a result to synthesise
        raise WorkerError(f"search for {query!r} found nothing", kind="worker")
    found = [asdict(h) for h in hits[:5]]
    text = "; ".join(f"{h['title']}: {h['snippet']}" for h in found)
    return {"hits": found, "text": text}


async def _think(ctx: WorkContext) -> dict[str, Any]:
    text = await ctx.llm.atext(
        purpose="decomposition.think", prompt=f"Think through: {ctx.task['goal']}",
        context=ctx.llm_context(),
    )
    return {"text": text}


async def _write(ctx: WorkContext) -> dict[str, Any]:
    text = await ctx.llm.atext(
        purpose="decomposition.write", prompt=f"Write: {ctx.task['goal']}",
        context=ctx.llm_context(),
    )
    return {"text": text}


async def _unreliable(ctx: WorkContext) -> dict[str, Any]:
    # A demo tool for failure paths: the scripted planner's retry rewrites the goal.
    if "unreachable" in ctx.task["goal"].lower():
        raise WorkerError(f"source unreachable for {ctx.task['goal']!r}")
    return {"text": f"fetched: {ctx.task['goal']}"}


def clarify_request(task: Mapping[str, Any], attempt: int, reason: str | None) -> dict[str, Any]:
    """The interrupt payload the dashboard renders as a form for a clarify task."""
    inputs = task.get("input") or {}
    choices = [str(c) for c in inputs.get("choices") or []]
    return {
        "field": task["id"],
        "prompt": str(inputs.get("question") or task["goal"]),
        "kind": "choice" if choices else "text",
        "choices": choices,
        "constraints": {} if choices else {"min_length": 1},
        "attempt": attempt,
        "reason": reason,
        "task_id": task["id"],
    }


def _answer_of(value: Any, task_id: str) -> str:
    if isinstance(value, Mapping):
        value = next((value[k] for k in ("answer", "value", task_id) if k in value), "")
    return "" if value is None else str(value).strip()


async def _clarify(ctx: WorkContext) -> dict[str, Any]:
    # Only pure computation happens before interrupt(): LangGraph re-runs this on resume.
    reason: str | None = None
    for attempt in range(1, CLARIFY_MAX_ATTEMPTS + 1):
        request = clarify_request(ctx.task, attempt, reason)
        answer = _answer_of(interrupt(request), ctx.task["id"])
        if not answer:
            reason = "the answer was empty; please type an answer"
            continue
        if request["choices"]:
            match = next((c for c in request["choices"] if c.lower() == answer.lower()), None)
            if match is None:
                reason = f"{answer!r} is not one of: {', '.join(request['choices'])}"
                continue
            answer = match
        return {"answer": answer, "question": request["prompt"], "text": answer}
    raise WorkerError(f"no usable answer after {CLARIFY_MAX_ATTEMPTS} attempts: {reason}")


class GateAnswer(BaseModel):
    """forge-lcdl ``llm_boolean_gate``: a yes/no verdict with a reason."""

    answer: bool
    reason: str = ""


class RouteAnswer(BaseModel):
    """forge-lcdl ``llm_enum_route``: one label out of the given ones."""

    label: str


async def _gate(ctx: WorkContext) -> dict[str, Any]:
    out = await ctx.llm.astructured(
        purpose="decomposition.gate", prompt=str(ctx.inputs["question"]), schema=GateAnswer,
        context=ctx.llm_context(),
    )
    return {"answer": out.answer, "text": out.reason or str(out.answer)}


async def _route(ctx: WorkContext) -> dict[str, Any]:
    labels = [str(x) for x in ctx.inputs["labels"]]
    out = await ctx.llm.astructured(
        purpose="decomposition.route", prompt=f"Choose one of {labels}", schema=RouteAnswer,
        context=ctx.llm_context(),
    )
    if out.label not in labels:
        raise WorkerError(f"route answered {out.label!r}; must be one of: {', '.join(labels)}")
    return {"label": out.label, "text": out.label}


def default_workers() -> dict[str, Worker]:
    """A fresh copy of the built-in worker registry (callers may add their own)."""
    has_goal = Precondition("the task states what to do", lambda c: bool(c.task["goal"].strip()))
    workers = [
        Worker("search", "look the goal up with the search port", _search, (
            Precondition("a search backend is configured", lambda c: c.search is not None),
            Precondition("the task names something to look up", lambda c: bool(_query(c))),
        )),
        Worker("think", "reason about the goal with the LLM", _think, (has_goal,)),
        Worker("write", "write the goal's text with the LLM", _write, (has_goal,)),
        Worker(CLARIFY, "ask the operator a question (interrupt)", _clarify, (has_goal,)),
        Worker("unreliable", "demo tool that fails on 'unreachable' goals", _unreliable),
        Worker("llm_boolean_gate", "forge-lcdl yes/no gate", _gate, (
            Precondition("input has a 'question'", lambda c: bool(c.inputs.get("question"))),
        )),
        Worker("llm_enum_route", "forge-lcdl label router", _route, (
            Precondition("input has a non-empty 'labels' list",
                         lambda c: isinstance(c.inputs.get("labels"), list)
                         and bool(c.inputs["labels"])),
        )),
    ]
    return {w.name: w for w in workers}
