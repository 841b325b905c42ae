"""A test graph that spends: ``steps`` nodes in a row, each one model call (through the
executor's LLM port: the scripted model, or the loopback OpenAI-compatible one), or a
direct ``ChatOpenAI`` call with ``max_tokens`` when the input names it."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph

from planner.llm import scripted_responder
from planner.registry import GraphSpec, register
from tests.openai_server import chat_model

PURPOSE = "test.budget.say"


class SpendState(TypedDict, total=False):
    """How many calls to make, how long each node waits first, the calls' max_tokens."""

    steps: int
    n: int
    delay: float
    max_tokens: int
    fan: int
    careful: bool
    said: list[str]


@scripted_responder(PURPOSE)
def _say(context: Any) -> str:
    return f"call {context.get('n')}"


def build(*, llm: Any = None, search: Any = None) -> StateGraph:
    """call ↺ until ``steps`` calls were made."""

    async def call(state: SpendState) -> dict[str, Any]:
        if state.get("delay"):
            await asyncio.sleep(state["delay"])
        n = state.get("n", 0) + 1
        if state.get("fan"):  # that many calls at once, on the loopback model
            answers = await asyncio.gather(*(chat_model().ainvoke(f"say {n}.{i}")
                                             for i in range(state["fan"])),
                                           return_exceptions=True)
            failed = [a for a in answers if isinstance(a, BaseException)]
            if failed:
                raise failed[0]
            text = " ".join(str(a.content) for a in answers)
        elif state.get("max_tokens"):
            model = chat_model().bind(max_tokens=state["max_tokens"])
            text = str((await model.ainvoke(f"say {n}")).content)
        elif state.get("careful"):  # as the planners' workers: a failed call is an answer
            try:
                text = await llm.atext(purpose=PURPOSE, prompt=f"say {n}", context={"n": n})
            except GraphBubbleUp:
                raise  # LangGraph's rule: its signals pass through
            except Exception as exc:
                text = f"failed: {exc}"
        else:
            text = await llm.atext(purpose=PURPOSE, prompt=f"say {n}", context={"n": n})
        return {"n": n, "said": [*state.get("said", []), text]}

    async def route(state: SpendState) -> str:
        return "call" if state["n"] < state["steps"] else END

    g = StateGraph(SpendState)
    g.add_node("call", call)
    g.add_edge(START, "call")
    g.add_conditional_edges("call", route, ["call", END])
    return g


def make_input(values: dict[str, Any]) -> dict[str, Any]:
    """The input as given (tests only)."""
    return {"n": 0, "said": [], "steps": int(values.get("steps", 3)),
            "delay": float(values.get("delay") or 0),
            "max_tokens": int(values.get("max_tokens") or 0),
            "fan": int(values.get("fan") or 0), "careful": bool(values.get("careful"))}


NAME = "test.budget"
SPEC = register(GraphSpec(
    name=NAME, title="Spend (tests)", description="One model call a step.", version=1,
    build=build, make_input=make_input, output_of=lambda values: {"said": values["said"]}))
