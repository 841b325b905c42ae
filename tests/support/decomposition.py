"""The decomposition graph under test: compiled with InMemorySaver and driven as the
dashboard drives it; plans the scripted model answers (WriteHERE XML, forge-lcdl packs)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from planner.decomposition import build_graph, make_input
from planner.decomposition.workers import Worker
from planner.llm import ScriptedLLM
from planner.search import SearchHit

STREAM_MODES = ["tasks", "updates", "checkpoints", "custom"]


class FakeSearch:
    """A search port with one hit for every query."""

    async def asearch(self, query: str, *, field: str | None = None) -> list[SearchHit]:
        return [SearchHit(title="Solar", snippet=f"about {query[:20]}", source="doc-1")]


class Run:
    """A compiled graph on one thread, driven the way the dashboard drives it."""

    def __init__(self, *, llm: Any = None, workers: Mapping[str, Worker] | None = None,
                 search: Any = None) -> None:
        builder = build_graph(llm=llm or ScriptedLLM(), search=search or FakeSearch(),
                              workers=workers)
        self.graph = builder.compile(checkpointer=InMemorySaver())
        self.config = {"configurable": {"thread_id": "test:planner"}}
        self.parts: list[Any] = []

    async def go(self, payload: Any) -> Any:
        """Stream until the graph finishes or interrupts; return the state snapshot."""
        async for part in self.graph.astream(payload, self.config, stream_mode=STREAM_MODES,
                                             subgraphs=True, durability="sync"):
            self.parts.append(part)
        return await self.graph.aget_state(self.config)

    async def start(self, **values: Any) -> Any:
        """Start the graph on the start-form ``values``; the state snapshot it ended at."""
        return await self.go(make_input(values))


def statuses(state: Any) -> dict[str, str]:
    """Each task's status in ``state``, by task id."""
    return {tid: t["status"] for tid, t in state.values["tasks"].items()}


def xml_plan(*tasks: tuple[str, str, str, str, bool]) -> str:
    """``(id, goal, task_type, deps, atomic)`` rows as a WriteHERE XML plan."""
    rows = "".join(
        f"<task><id>{i}</id><goal>{g}</goal><task_type>{t}</task_type>"
        f"<dependency>{d}</dependency><atom>{str(a).lower()}</atom></task>"
        for i, g, t, d, a in tasks
    )
    return f"<plan>{rows}</plan>"


def plans_by_task(mapping: Mapping[str, str]) -> Callable[[Mapping[str, Any]], str]:
    """A ``decomposition.plan`` override answering per planned task id."""
    return lambda ctx: mapping.get(ctx["task_id"], "<plan></plan>")


def pack(nodes: dict[str, Any]) -> str:
    """``nodes`` as a forge-lcdl pack (schema 2) starting at the first of them."""
    return json.dumps({"schema_version": 2, "start": next(iter(nodes)), "nodes": nodes})
