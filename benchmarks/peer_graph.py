"""The graph every system hosts in the peers benchmark: a chain of 80 trivial async nodes.

Each node returns ``{"t": time.time(), "i": <its index>}``: the wall-clock moment it
completed, so a watcher on the same machine measures node completion → receipt as its own
receive time minus ``t``. The module is pure LangGraph (the peers' servers load it by file
path from ``benchmarks/peers/langgraph.json`` and ``aegra.json``); when Planwatch's
registry is importable it also declares the graph as ``bench.chain80`` (``SPEC``)
(``PLANWATCH_GRAPH_MODULES=benchmarks.peer_graph``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

NODES = 80
NAME = "bench.chain80"


class ChainState(TypedDict, total=False):
    """The completion time and index of the node that ran last."""

    t: float
    i: int


def node_name(index: int) -> str:
    """``n00`` … ``n79``."""
    return f"n{index:02d}"


def _node(index: int) -> Callable[[ChainState], Awaitable[dict[str, Any]]]:
    async def node(state: ChainState) -> dict[str, Any]:
        return {"t": time.time(), "i": index}

    node.__name__ = node_name(index)
    return node


def build(*, llm: Any = None, search: Any = None) -> StateGraph:
    """The uncompiled chain ``n00 → n01 → … → n79`` (hosts compile it with their saver)."""
    g = StateGraph(ChainState)
    for index in range(NODES):
        g.add_node(node_name(index), _node(index))
    g.add_edge(START, node_name(0))
    for index in range(1, NODES):
        g.add_edge(node_name(index - 1), node_name(index))
    g.add_edge(node_name(NODES - 1), END)
    return g


def make_input(values: Mapping[str, Any]) -> dict[str, Any]:
    """The chain takes no input."""
    return {"i": -1}


# The API servers compile with their own checkpointer; this is what their config names.
graph = build().compile()


try:  # Planwatch's registry loads ``SPEC`` (PLANWATCH_GRAPH_MODULES=benchmarks.peer_graph)
    from planner.spec import GraphSpec
except ImportError:  # loaded by a peer server, where Planwatch is not installed
    pass
else:
    SPEC = GraphSpec(
        name=NAME, title="Chain of 80 (benchmark)",
        description="80 trivial async nodes in a chain; each stamps its completion time.",
        version=1, build=build, make_input=make_input,
    )
