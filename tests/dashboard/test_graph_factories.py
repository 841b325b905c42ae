"""A ``langgraph.json`` factory is called for each run, as LangGraph's server calls it: an
async context manager taking ``(config, runtime)`` decides the graph's shape from the run's
context, reads the run's user, and stays entered while the run executes."""

from __future__ import annotations

import sys

import pytest

from dashboard import services
from dashboard.models import Run
from planner import registry
from tests.conftest import wait_run
from tests.graphs import langgraph_json_graph

pytestmark = [pytest.mark.django_db(transaction=True)]  # planner and executor: one pass

FACTORY_PY = '''
import contextlib
from typing import Annotated, TypedDict
import operator

from langgraph.graph import END, START, StateGraph

CALLS = []


class State(TypedDict, total=False):
    path: Annotated[list, operator.add]
    who: str
    thread: str


def build(wide, who, thread):
    async def first(state):
        return {"path": ["first"], "who": who, "thread": thread}

    async def second(state):
        return {"path": ["second"]}

    builder = StateGraph(State)
    builder.add_node("first", first)
    builder.add_edge(START, "first")
    if wide:
        builder.add_node("second", second)
        builder.add_edge("first", "second")
        builder.add_edge("second", END)
    else:
        builder.add_edge("first", END)
    return builder


@contextlib.asynccontextmanager
async def factory(config, runtime):
    ert = runtime.execution_runtime
    wide = bool(ert is not None and (ert.context or {}).get("wide"))
    who = runtime.user.identity if runtime.user is not None else ""
    thread = config.get("configurable", {}).get("thread_id", "")
    CALLS.append(("enter", runtime.access_context, who))
    yield build(wide, who, thread)
    CALLS.append(("exit", runtime.access_context, who))
'''


@pytest.fixture
def factory_graph(tmp_path):
    with langgraph_json_graph(tmp_path, name="factory", module="factory_graph",
                              source=FACTORY_PY, attribute="factory"):
        yield sys.modules["langgraph_json_factory"]


def test_an_async_context_manager_factory_is_loaded_and_inspected(factory_graph):
    spec = registry.get_graph("factory")
    assert factory_graph.CALLS == [("enter", "assistants.read", ""),
                                   ("exit", "assistants.read", "")]
    assert set(spec.inspection_graph.get_graph().nodes) == {"__start__", "first", "__end__"}


def test_each_run_gets_the_graph_its_context_and_user_make(factory_graph, executor,
                                                           operator):
    narrow = wait_run(services.run_create(graph="factory", input={}, user=operator).id)
    wide = wait_run(services.run_create(graph="factory", input={}, user=operator,
                                        options=services.RunOptions(context={"wide": True})).id)
    assert narrow.status == wide.status == Run.Status.SUCCEEDED, wide.error_message
    assert narrow.output["path"] == ["first"]
    assert wide.output["path"] == ["first", "second"]  # the shape this run's context chose
    assert wide.output["who"] == operator.username  # runtime.user is who started it
    assert wide.output["thread"] == wide.thread_id  # the run's own config
    runs = [c for c in factory_graph.CALLS if c[1] == "threads.create_run"]
    # entered for each run, and left when its execution ended
    assert runs == [("enter", "threads.create_run", operator.username),
                    ("exit", "threads.create_run", operator.username)] * 2
