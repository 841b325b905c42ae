"""The graph of the "many runs in flight" figure: four nodes in a loop, each awaiting a model.

``plan → act → observe → reflect`` and back to ``plan`` for ``ITERATIONS`` rounds (20
nodes a run). Every node awaits ``BENCH_NODE_SECONDS`` (read when it runs, so each
server's process takes it from its environment) as a model call would, sends a custom
event through LangGraph's stream writer, and returns ``{"t": <completion time>}``: a
client on the same machine measures completion → receipt as its receive time minus ``t``.
Pure LangGraph: every server loads it by file path from ``benchmarks/inflight/*.json``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph

NODES = ("plan", "act", "observe", "reflect")
ITERATIONS = 5
NAME = "loop4"
"""The graph's name in the figure's ``langgraph.json`` (the assistant every server serves)."""


class LoopState(TypedDict, total=False):
    """The completion time of the node that ran last, and how many rounds are done."""

    t: float
    rounds: int


def node_seconds() -> float:
    """Seconds every node awaits (``BENCH_NODE_SECONDS``, 0.5 by default)."""
    return float(os.environ.get("BENCH_NODE_SECONDS", "0.5"))


def _node(name: str) -> Callable[[LoopState], Awaitable[dict[str, Any]]]:
    async def node(state: LoopState) -> dict[str, Any]:
        await asyncio.sleep(node_seconds())
        update: dict[str, Any] = {"t": time.time()}
        if name == NODES[-1]:
            update["rounds"] = state.get("rounds", 0) + 1
        get_stream_writer()({"node": name, "t": update["t"]})
        return update

    node.__name__ = name
    return node


def _again(state: LoopState) -> str:
    return END if state.get("rounds", 0) >= ITERATIONS else NODES[0]


def build() -> StateGraph:
    """The uncompiled loop (servers compile it with their own checkpointer)."""
    g = StateGraph(LoopState)
    for name in NODES:
        g.add_node(name, _node(name))  # type: ignore[call-overload]
    g.add_edge(START, NODES[0])
    for before, after in itertools.pairwise(NODES):
        g.add_edge(before, after)
    g.add_conditional_edges(NODES[-1], _again, [NODES[0], END])
    return g


graph = build().compile()
