"""Small graphs registered only in tests, to exercise the run service on its own terms."""

from __future__ import annotations

import asyncio
import json
import operator
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from planner import registry
from planner.chat import ChatMessages, ai, opening_messages
from planner.registry import GraphSpec, InputError, InputField, register


class EchoState(TypedDict, total=False):
    """A counter walked through a few steps, optionally asking a question on the way."""

    n: int
    steps: int
    ask: bool
    fail_at: int
    delay: float
    route_delay: float  # the conditional edge after a step takes this long
    held_by: str  # a file: the steps take their delay while it exists
    answer: Any
    trail: Annotated[list[str], operator.add]
    result: dict[str, Any]


async def step(state: EchoState) -> dict[str, Any]:
    """Advance the counter (and fail on request); each step takes ``delay`` seconds (only
    while the file ``held_by`` exists, when one is named)."""
    held = not state.get("held_by") or await asyncio.to_thread(os.path.exists, state["held_by"])
    if state.get("delay") and held:
        await asyncio.sleep(state["delay"])
    n = state.get("n", 0) + 1
    if state.get("fail_at") == n:
        raise RuntimeError(f"step {n} failed on purpose")
    return {"n": n, "trail": [f"step{n}"]}


async def ask(state: EchoState) -> dict[str, Any]:
    """Ask the operator for a value."""
    answer = interrupt({"field": "echo.value", "prompt": "Say something", "kind": "text"})
    return {"answer": answer, "trail": ["ask"]}


async def done(state: EchoState) -> dict[str, Any]:
    """Write the result."""
    return {"result": {"n": state["n"], "answer": state.get("answer")}, "trail": ["done"]}


async def route(state: EchoState) -> str:
    """Loop until ``steps``; ask once half way when asked to."""
    if state.get("route_delay"):
        await asyncio.sleep(state["route_delay"])
    if state.get("ask") and state["n"] == state["steps"] // 2 and state.get("answer") is None:
        return "ask"
    return "step" if state["n"] < state["steps"] else "done"


def build(*, llm: Any = None, search: Any = None) -> StateGraph:
    """The echo graph: step ↺ (ask) → done."""
    g = StateGraph(EchoState)
    g.add_node("step", step)
    g.add_node("ask", ask)
    g.add_node("done", done)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", route, ["step", "ask", "done"])
    g.add_edge("ask", "step")
    g.add_edge("done", END)
    return g


def make_input(values: dict[str, Any]) -> dict[str, Any]:
    """Validate the echo input."""
    try:
        steps = int(values.get("steps", 3))
    except (TypeError, ValueError):
        raise InputError({"steps": f"{values.get('steps')!r} is not a whole number"}) from None
    if not 1 <= steps <= 1000:
        raise InputError({"steps": f"{steps} is out of range; use 1 to 1000"})
    try:
        fail_at = int(values.get("fail_at") or 0)
    except (TypeError, ValueError):
        raise InputError({"fail_at": f"{values.get('fail_at')!r} is not a whole number"}) from None
    try:
        delay = float(values.get("delay") or 0)
    except (TypeError, ValueError):
        raise InputError({"delay": f"{values.get('delay')!r} is not a number of seconds"}) from None
    return {"n": 0, "steps": steps, "ask": bool(values.get("ask")), "fail_at": fail_at,
            "delay": delay, "route_delay": float(values.get("route_delay") or 0),
            "held_by": str(values.get("held_by") or "")}


ECHO = register(GraphSpec(
    name="test.echo", title="Echo (tests)", description="Counts; may ask; may fail.",
    version=1, build=build, make_input=make_input,
    input_fields=(InputField("steps", "Steps", kind="integer", default=3),),
))


class ChatState(TypedDict, total=False):
    """A goal and its transcript; the answer fails when ``fail`` names why."""

    goal: str
    fail: str
    messages: ChatMessages


async def think(state: ChatState) -> dict[str, Any]:
    """Say something in the chat, then (``fail``) raise as a crashing node does."""
    said = {"messages": [ai(f"Working on: {state.get('goal')}")]}
    if state.get("fail"):
        raise RuntimeError(state["fail"])
    return said


def build_chat(*, llm: Any = None, search: Any = None) -> StateGraph:
    """The chat graph: think."""
    g = StateGraph(ChatState)
    g.add_node("think", think)
    g.add_edge(START, "think")
    g.add_edge("think", END)
    return g


def make_chat_input(values: dict[str, Any]) -> dict[str, Any]:
    """A goal (a chat's last human message), its transcript, and why to fail ("" : not)."""
    goal = str(values.get("goal") or "a goal")
    return {"goal": goal, "fail": str(values.get("fail") or ""),
            "messages": opening_messages(values.get("messages"), goal)}


CHAT = register(GraphSpec(
    name="test.chat", title="Chat (tests)", description="Says one thing; may crash.",
    version=1, build=build_chat, make_input=make_chat_input, chat_goal_field="goal",
    messages_channel="messages",
))


@contextmanager
def langgraph_json_graph(folder: Path, *, name: str, module: str, source: str,
                         attribute: str = "graph") -> Iterator[None]:
    """The graph ``attribute`` of ``module``.py (holding ``source``), named ``name`` by a
    ``langgraph.json`` in ``folder``, registered while the block runs; the registry as it
    was afterwards."""
    (folder / f"{module}.py").write_text(source)
    config = folder / "langgraph.json"
    config.write_text(json.dumps({"dependencies": ["."],
                                  "graphs": {name: f"./{module}.py:{attribute}"}}))
    before = dict(registry.GRAPHS)
    registry.load_langgraph_config(str(config))
    try:
        yield
    finally:
        registry.GRAPHS.clear()
        registry.GRAPHS.update(before)
