"""Graph state of the decomposition planner, its reducers, and the start form.

Everything in state is plain JSON (the dashboard stores updates as JSON). ``tasks`` is
merged per task and per field, so parallel ``Send`` branches each patch their own task
without clobbering the others.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any, TypedDict

from planner.chat import ChatMessages, opening_messages, split_messages
from planner.decomposition.dag import UNKNOWN_DEPENDENCY_POLICIES
from planner.decomposition.parsing import PLAN_FORMS
from planner.decomposition.tasks import ERROR_POLICIES
from planner.spec import InputField, clean_inputs

DEFAULT_GOAL = "Write a short briefing on community solar power for a town council"
FAILURE_MODES: tuple[str, ...] = ("none", "worker_error", "flaky", "unknown_worker",
                                  "optional_error", "uncertain")


def merge_tasks(
    left: Mapping[str, Mapping[str, Any]] | None, right: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """Reducer for ``tasks``: apply each per-task patch field by field."""
    out = {tid: dict(task) for tid, task in (left or {}).items()}
    for tid, patch in (right or {}).items():
        out[tid] = {**out.get(tid, {}), **patch}
    return out


class DecompositionState(TypedDict, total=False):
    """The planner's state; every key is JSON-friendly."""

    goal: str
    plan_form: str
    error_policy: str
    unknown_dependencies: str
    max_rounds: int
    max_depth: int
    max_retries: int
    breadth: int
    ask_clarifications: bool
    inject_failure: str
    tasks: Annotated[dict[str, dict[str, Any]], merge_tasks]
    round: int
    plans: Annotated[list[dict[str, Any]], operator.add]
    decisions: Annotated[list[dict[str, Any]], operator.add]
    status: str
    reason: str | None
    synthesis: str | None
    synthesis_inputs: dict[str, dict[str, str]] | None
    result: dict[str, Any] | None
    messages: ChatMessages
    """The chat transcript (``planner.chat``): the goal, each clarifying question and its
    answer, the synthesis."""


INPUT_FIELDS: tuple[InputField, ...] = (
    InputField("goal", "Goal", "textarea", default=DEFAULT_GOAL,
               help="What the planner should decompose."),
    InputField("plan_form", "Plan form", "choice", default="writehere_xml", choices=PLAN_FORMS,
               help="The form the scripted model answers plans in."),
    InputField("error_policy", "Error policy", "choice", default="stop_on_first_error",
               choices=ERROR_POLICIES,
               help="Stop at the first failed task, or let other branches finish."),
    InputField("max_rounds", "Max rounds", "integer", default=8, min_value=1, max_value=50),
    InputField("max_depth", "Max depth", "integer", default=3, min_value=1, max_value=5,
               help="Tasks this deep are executed instead of planned again."),
    InputField("max_retries", "Retries per failed task", "integer", default=1, min_value=0,
               max_value=3),
    InputField("breadth", "Breadth", "integer", default=2, min_value=1, max_value=16,
               help="Sections in the draft; 5 or more also splits each section "
                    "(14 gives about 200 tasks)."),
    InputField("ask_clarifications", "Ask two clarifying questions", "boolean",
               required=False, default=False),
    InputField("inject_failure", "Inject a failing task", "choice", required=False,
               default="none", choices=FAILURE_MODES),
    InputField("unknown_dependencies", "Unknown dependencies in a plan", "choice",
               default="error", choices=UNKNOWN_DEPENDENCY_POLICIES),
)


def make_input(values: Mapping[str, Any]) -> dict[str, Any]:
    """Turn start-form or API values into the initial state; raise ``InputError``.

    Missing fields take their defaults; keys that are not fields are refused. A chat
    client's ``messages`` open the transcript (else the goal does).
    """
    rest, sent = split_messages(values)
    cleaned = clean_inputs(INPUT_FIELDS, rest)
    return {**cleaned, "messages": opening_messages(sent, cleaned["goal"])}
