"""The acquisition planner's topology (seed 001's hybrid), built uncompiled for the host.

START → tick → (finish | bootstrap_gate); bootstrap_gate → (ask_user | prepare);
prepare → select → (decision_policy | decide → decision_policy); decision_policy →
(search | ask_user | calculate | reflect | finish); search → (observe | tick);
observe, calculate, observe_user, reflect → tick; ask_user → observe_user; finish → END.
"""

from __future__ import annotations

from typing import Any, cast

from langgraph.graph import END, START, StateGraph

from planner.acquisition import actions, nodes, routers
from planner.acquisition.state import AcquisitionState
from planner.llm import LLMPort
from planner.search import SearchPort

GRAPH_VERSION = 1
"""Bump on any change of node names or edges: thread ids become ``…:planner:v<N>``."""

NODES = ("tick", "bootstrap_gate", "prepare", "select", "decide", "decision_policy", "search",
         "observe", "calculate", "ask_user", "observe_user", "reflect", "finish")


def build_graph(*, llm: LLMPort, search: SearchPort) -> StateGraph[Any]:
    """The uncompiled graph; the host compiles it with its own checkpointer."""
    # typed as Any: LangGraph's add_node overloads cannot match our async node functions
    builder: StateGraph[Any] = StateGraph(AcquisitionState)
    builder.add_node("tick", nodes.tick)
    builder.add_node("bootstrap_gate", nodes.bootstrap_gate)
    builder.add_node("prepare", nodes.prepare)
    builder.add_node("select", nodes.select)
    builder.add_node("decide", cast(Any, nodes.make_decide(llm)))
    builder.add_node("decision_policy", nodes.decision_policy)
    builder.add_node("search", cast(Any, actions.make_search(search)))
    builder.add_node("observe", actions.observe)
    builder.add_node("calculate", actions.calculate)
    builder.add_node("ask_user", actions.ask_user)
    builder.add_node("observe_user", actions.observe_user)
    builder.add_node("reflect", actions.reflect)
    builder.add_node("finish", actions.finish)

    builder.add_edge(START, "tick")
    builder.add_conditional_edges("tick", routers.route_after_tick, ["finish", "bootstrap_gate"])
    builder.add_conditional_edges("bootstrap_gate", routers.route_after_bootstrap,
                                  ["ask_user", "prepare"])
    builder.add_edge("prepare", "select")
    builder.add_conditional_edges("select", routers.route_after_select,
                                  ["decision_policy", "decide"])
    builder.add_edge("decide", "decision_policy")
    builder.add_conditional_edges("decision_policy", routers.route_after_policy,
                                  ["search", "ask_user", "calculate", "reflect", "finish"])
    builder.add_conditional_edges("search", routers.route_after_search, ["observe", "tick"])
    for node in ("observe", "calculate", "observe_user", "reflect"):
        builder.add_edge(node, "tick")
    builder.add_edge("ask_user", "observe_user")
    builder.add_edge("finish", END)
    return builder
