"""The acquisition graph under test: compiled with InMemorySaver, driven and resumed;
states past bootstrap for its rules (``ready``, ``blocked``, ``succeeded``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planner.acquisition import build_graph, make_input
from planner.acquisition.state import AcquisitionState
from planner.llm import ScriptedLLM
from planner.search import LocalCorpusSearch

STREAM_MODES = ["tasks", "updates", "checkpoints", "custom"]
_threads = itertools.count()


@dataclass
class Trace:
    """What a driven run produced: node order, updates, interrupts, final state."""

    nodes: list[str] = field(default_factory=list)
    updates: list[tuple[str, dict[str, Any] | None]] = field(default_factory=list)
    questions: list[dict[str, Any]] = field(default_factory=list)
    interrupt_nodes: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    pending: bool = False

    def update_of(self, node: str) -> list[dict[str, Any] | None]:
        """Every update ``node`` wrote, in order."""
        return [u for n, u in self.updates if n == node]


def compile_graph(*, llm: Any = None, search: Any = None) -> Any:
    """The acquisition graph compiled with an in-memory checkpointer."""
    builder = build_graph(llm=llm or ScriptedLLM(), search=search or LocalCorpusSearch())
    return builder.compile(checkpointer=InMemorySaver())


def start(**form: Any) -> AcquisitionState:
    """The initial state for start-form values."""
    return make_input(form)


async def drive(graph: Any, payload: Any, answers: Iterable[Any] = (), *,
                by_id: bool = False, thread: str | None = None) -> Trace:
    """Run until the end (or until answers run out), answering each interrupt in turn."""
    config = {"configurable": {"thread_id": thread or f"t{next(_threads)}"},
              "recursion_limit": 500}
    trace = Trace()
    queue = list(answers)
    while True:
        async for _ns, mode, data in graph.astream(payload, config, stream_mode=STREAM_MODES,
                                                   subgraphs=True, durability="sync"):
            if mode == "updates":
                for node, update in data.items():
                    if node == "__interrupt__":
                        trace.questions.extend(i.value for i in update)
                    else:
                        trace.nodes.append(node)
                        trace.updates.append((node, update))
            elif mode == "tasks" and data.get("interrupts"):
                trace.interrupt_nodes.append(data["name"])
        state = await graph.aget_state(config)
        trace.values = dict(state.values)
        if not state.next:
            return trace
        pending = [i for t in state.tasks for i in t.interrupts]
        if not queue:
            trace.pending = True
            return trace
        answer = queue.pop(0)
        payload = Command(resume={pending[0].id: answer} if by_id else answer)


def scripted_with(decide: Any) -> ScriptedLLM:
    """A scripted model whose ``acquisition.decide`` answer is replaced."""
    return ScriptedLLM(overrides={"acquisition.decide": decide})


def sequence(*answers: Mapping[str, Any]) -> Any:
    """A responder returning ``answers`` in turn, then repeating the last one."""
    items = list(answers)

    def respond(_context: Mapping[str, Any]) -> Mapping[str, Any]:
        return items.pop(0) if len(items) > 1 else items[0]

    return respond


# -- states for the rules: past bootstrap (Germany, EUR) ------------------------------

POP, RATE, PRICE, TAM = ("market.population", "market.adoption_rate", "market.price",
                         "market.tam")
INPUTS = {POP: 84_500_000, RATE: 0.18, PRICE: 47.88}


def ready(**extra: Any) -> dict[str, Any]:
    """A state past bootstrap (Germany, EUR) with ``extra`` keys replaced."""
    state: dict[str, Any] = dict(start(region="Germany", currency="EUR"))
    state["iterations"] = 3
    values = {**state["values"], **extra.pop("values", {})}
    return {**state, "values": values, **extra}


def blocked(missing: list[str], runs: int = 1, **extra: Any) -> dict[str, Any]:
    """A state whose last calculation was blocked on ``missing``."""
    present = {k: v for k, v in INPUTS.items() if k not in missing}
    calc = {"status": "blocked", "target": TAM, "inputs": present, "missing": missing,
            "value": None}
    return ready(values=present, calculation=calc, calc_runs=runs, **extra)


def succeeded(**extra: Any) -> dict[str, Any]:
    """A state whose calculator succeeded on the inputs it holds."""
    calc = {"status": "success", "target": TAM, "inputs": dict(INPUTS), "missing": [],
            "value": 1.0}
    return ready(values={**INPUTS, TAM: 1.0}, calculation=calc, **{"calc_runs": 1, **extra})


def searched(field: str, *queries: str) -> list[dict[str, Any]]:
    """The search log entries of ``queries`` for ``field`` (no hits)."""
    return [{"iteration": 1, "field": field, "query": q, "hits": 0, "error": None}
            for q in queries]


def answered(field: str, n: int, valid: bool = False) -> list[dict[str, Any]]:
    """``n`` answers to ``field``'s question in the answer log (invalid unless ``valid``)."""
    return [{"iteration": 1, "field": field, "answer": "x", "valid": valid,
             "reason": None if valid else "bad"} for _ in range(n)]
