"""The header names the node that actually failed, not the one that ran before it."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from dashboard import services
from dashboard.models import Run
from planner.registry import GraphSpec, get_graph, register
from tests.conftest import wait_run

pytestmark = pytest.mark.django_db(transaction=True)


class TwoState(TypedDict, total=False):
    """What the first node wrote."""

    first: int


async def first(state: TwoState) -> dict[str, Any]:
    """Runs fine."""
    return {"first": 1}


async def calculate(state: TwoState) -> dict[str, Any]:
    """Fails, as a calculation over a bad value would."""
    raise ValueError("could not convert string to float: 'lots'")


def build(*, llm: Any = None, search: Any = None) -> StateGraph:
    """first → calculate (fails)."""
    g = StateGraph(TwoState)
    g.add_node("first", first)
    g.add_node("calculate", calculate)
    g.add_edge(START, "first")
    g.add_edge("first", "calculate")
    g.add_edge("calculate", END)
    return g


def _register() -> GraphSpec:
    try:
        return get_graph("test.fails_second")
    except KeyError:
        return register(GraphSpec(
            name="test.fails_second", title="Fails second (tests)",
            description="Its second node fails.", version=1, build=build,
            make_input=lambda values: {}))


def test_the_header_names_the_node_that_failed(executor, operator, client):
    _register()
    run = wait_run(services.run_create(graph="test.fails_second", input={}, user=operator).id)
    assert run.status == Run.Status.FAILED and "lots" in run.error_message
    assert run.current_node == "calculate"
    client.force_login(operator)
    html = client.get(f"/runs/{run.id}/").content.decode()
    assert '<b id="trace-current" class="mono">calculate</b>' in html
