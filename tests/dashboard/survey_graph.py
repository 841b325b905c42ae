"""A third graph, defined outside planner/: its own input, question kind, check and card.

Registered by importing this module; the dashboard learns everything about it from its
``GraphSpec`` (no dashboard change exists for it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from planner.presentation import ResultCard, ResultItem
from planner.questions import Checked, QuestionKind
from planner.registry import GRAPHS, GraphSpec, InputField, clean_inputs, register


class SurveyState(TypedDict, total=False):
    """A topic, the operator's rating of it, and the verdict."""

    topic: str
    rating: int
    result: dict[str, Any]


def check_rating(question: Mapping[str, Any], raw: Any) -> Checked:
    """A rating from 1 to 5, as a digit or as stars (``***``)."""
    text = str(raw or "").strip()
    value = len(text) if text and set(text) == {"*"} else (int(text) if text.isdigit() else None)
    if value is None or not 1 <= value <= 5:
        return None, f"{text!r} is no rating; give 1 to 5, or stars like ***"
    return value, None


async def ask(state: SurveyState) -> dict[str, Any]:
    """Ask for a rating (checked again here, as the form checks it)."""
    question = {"kind": "rating", "field": "rating", "prompt": f"Rate {state['topic']}"}
    value, reason = check_rating(question, interrupt(question))
    if reason:
        raise ValueError(reason)
    return {"rating": value}


async def verdict(state: SurveyState) -> dict[str, Any]:
    """Write the result."""
    return {"result": {"topic": state["topic"], "rating": state["rating"]}}


def build(*, llm: Any = None, search: Any = None) -> StateGraph[Any]:
    """ask → verdict."""
    g: StateGraph[Any] = StateGraph(SurveyState)
    g.add_node("ask", ask)
    g.add_node("verdict", verdict)
    g.add_edge(START, "ask")
    g.add_edge("ask", "verdict")
    g.add_edge("verdict", END)
    return g


FIELDS = (InputField("topic", "Topic", max_length=80, help="What to rate."),)


def present(output: Any) -> ResultCard:
    """The rating as stars."""
    stars = "★" * int(output["rating"])
    return ResultCard(headline=f"{output['topic']}: {stars}",
                      items=(ResultItem("rating", f"{output['rating']} of 5", "answered"),))


SPEC = GRAPHS.get("test.survey") or register(GraphSpec(
    name="test.survey", title="Survey (tests)", description="Asks for a rating.", version=1,
    build=build, make_input=lambda values: clean_inputs(FIELDS, values), input_fields=FIELDS,
    questions={"rating": QuestionKind("text", check_rating, hint="1 to 5, or stars like ***")},
    present_result=present,
))
