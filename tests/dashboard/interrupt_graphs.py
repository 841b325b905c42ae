"""A test graph that asks whatever payload its input names (a user's own graph's questions)."""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from planner.acquisition.validation import QUESTIONS as ACQUISITION_QUESTIONS
from planner.registry import GraphSpec, InputError, get_graph, register


class AskState(TypedDict, total=False):
    """The payload to ask with, and the answer the graph was resumed with."""

    payload: Any
    answer: Any
    result: Any


async def ask(state: AskState) -> dict[str, Any]:
    """Interrupt with the configured payload."""
    return {"answer": interrupt(state["payload"])}


async def done(state: AskState) -> dict[str, Any]:
    """Keep the answer as the run's output."""
    return {"result": {"answer": state["answer"]}}


def build(*, llm: Any = None, search: Any = None) -> StateGraph:
    """ask → done."""
    g = StateGraph(AskState)
    g.add_node("ask", ask)
    g.add_node("done", done)
    g.add_edge(START, "ask")
    g.add_edge("ask", "done")
    g.add_edge("done", END)
    return g


def _register() -> GraphSpec:
    try:
        return get_graph("test.ask")
    except KeyError:
        return register(GraphSpec(
            name="test.ask", title="Ask (tests)", description="Asks its input's payload.",
            version=1, build=build, make_input=make_input,
            # the region and currency questions as the acquisition planner declares them
            questions=ACQUISITION_QUESTIONS,
        ))


def make_input(values: Any) -> dict[str, Any]:
    """The payload to ask with (required)."""
    if "payload" not in values:
        raise InputError({"payload": "required: the value the graph asks the operator with"})
    return {"payload": values["payload"]}


ASK = _register()
