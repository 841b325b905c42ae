"""The test model for runs: the OpenAI-compatible test server (tests.openai_server) as
the executor's LLM port, its model priced, and a ``langgraph.json`` graph calling it.

A pytest plugin (tests/conftest.py's ``pytest_plugins``): its fixtures serve the
dashboard's, the engine's and the browser's tests alike.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.graphs import langgraph_json_graph
from tests.openai_server import MODEL, OpenAIServer

PRICES = {MODEL: {"input": 2.0, "output": 10.0}}  # USD per million tokens
CALL_COST = 120 * 2.0 / 1e6 + 30 * 10.0 / 1e6
"""What one call of the test server costs at ``PRICES`` (it reports 120 tokens in, 30 out)."""

CHAT_GRAPH = textwrap.dedent('''
    from typing import Annotated, TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    from tests.openai_server import chat_model


    class State(TypedDict):
        messages: Annotated[list, add_messages]


    def think(state):  # a sync node: the client's sync path, on a worker thread
        return {"messages": [chat_model().invoke(state["messages"])]}


    async def reply(state):  # streamed: the first token's time is recorded
        return {"messages": [await chat_model(streaming=True).ainvoke(state["messages"])]}


    builder = StateGraph(State)
    builder.add_node("think", think)
    builder.add_node("reply", reply)
    builder.add_edge(START, "think")
    builder.add_edge("think", "reply")
    builder.add_edge("reply", END)
    graph = builder.compile()
''')


@pytest.fixture
def openai_server(monkeypatch):
    """The OpenAI-compatible test server, named for ``tests.openai_server:chat_model``."""
    server = OpenAIServer().start()
    monkeypatch.setenv("PLANWATCH_TEST_OPENAI_URL", server.url)
    yield server
    server.stop()


@pytest.fixture
def on_test_model(executor, openai_server, settings):
    """The executor's LLM port is ``ChatOpenAI`` on the test server, its model priced."""
    from dashboard.runs.dispatch import get_executor, reset_executor

    settings.PLANWATCH = {**settings.PLANWATCH, "LLM": "tests.openai_server:chat_model",
                          "MODEL_PRICES": PRICES}
    reset_executor()
    yield get_executor()
    reset_executor()


@pytest.fixture
def chat_graph(tmp_path):
    """A langgraph.json graph ``chat`` that calls ``ChatOpenAI`` itself."""
    with langgraph_json_graph(tmp_path, name="chat", module="chat_graph", source=CHAT_GRAPH):
        yield "chat"
