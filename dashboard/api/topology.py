"""A registered graph's topology (nodes and edges), read from LangGraph's own drawing model."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from planner.llm import ScriptedLLM
from planner.registry import GraphSpec
from planner.search import LocalCorpusSearch


@lru_cache(maxsize=64)
def graph_topology(spec: GraphSpec) -> dict[str, list[Any]]:
    """Nodes and edges of ``spec``'s graph, compiled without a checkpointer (never run)."""
    drawable = spec.build(llm=ScriptedLLM(), search=LocalCorpusSearch()).compile().get_graph()
    return {
        "nodes": list(drawable.nodes),
        "edges": [{"source": e.source, "target": e.target, "conditional": bool(e.conditional)}
                  for e in drawable.edges],
    }
