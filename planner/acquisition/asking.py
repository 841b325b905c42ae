"""What the acquisition planner asks, and what it says in its chat transcript.

``question_for`` is the interrupt payload (the form the dashboard renders); the messages
are those of the planner's ``messages`` channel (:mod:`planner.chat`): each question as
an AI message, written by the node that decides to ask (so a chat client shows it while
the run waits), each answer as a human message, the result in plain words at the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.acquisition import recipes
from planner.acquisition.currencies import COMMON_CURRENCIES
from planner.acquisition.presentation import present_result
from planner.acquisition.profile import FieldSpec, Profile, get_profile
from planner.acquisition.regions import currency_of, region_in_goal
from planner.acquisition.state import AcquisitionState
from planner.acquisition.validation import known_regions, region_aliases
from planner.chat import ai, human
from planner.questions import question_text, text_of


def question_for(state: AcquisitionState, profile: Profile, spec: FieldSpec) -> dict[str, Any]:
    """The interrupt payload for ``spec``: the form the dashboard renders."""
    cap = profile.bootstrap_attempts if spec.strategy == "bootstrap" else profile.ask_cap
    question: dict[str, Any] = {
        "field": spec.name,
        "label": spec.label,
        "prompt": recipes.fill(spec.prompt or f"What is the {spec.label.lower()}?", state),
        "kind": spec.kind,
        "choices": [],
        "constraints": {},
        "unit": recipes.fill(spec.unit, state),
        "attempt": recipes.ask_count(state, spec.name) + 1,
        "max_attempts": cap,
        "reason": recipes.last_rejection(state, spec.name),
    }
    if spec.kind == "region":
        question["choices"] = known_regions()
        question["suggested"] = region_in_goal(state.get("goal") or "", region_aliases())
    elif spec.kind == "currency":
        question["choices"] = list(COMMON_CURRENCIES)
        question["suggested"] = currency_of(
            (state.get("values") or {}).get("core.region") or
            region_in_goal(state.get("goal") or "", region_aliases()))
    elif spec.kind == "number":
        question["constraints"] = {"min": spec.min_value, "max": spec.max_value}
    return question



def question_asked(state: AcquisitionState, decided: Mapping[str, Any] | None) -> dict[str, Any]:
    """The question ``decided`` asks, as the AI message of the transcript (an update of
    the ``messages`` channel); nothing when the decision is not to ask."""
    decided = decided or {}
    profile = get_profile(state["profile"])
    if decided.get("action") != "ask_user" or not profile.has(decided.get("field")):
        return {}
    question = question_for(state, profile, profile.field(str(decided["field"])))
    return {"messages": [ai(question_text(question))]}


def answer_message(raw: Any) -> dict[str, Any]:
    """An operator's answer as the human message of the transcript."""
    return human(text_of(raw) if not isinstance(raw, dict | list) else str(raw))


def result_message(result: Mapping[str, Any]) -> dict[str, Any]:
    """The run's result in plain words: the figure and its formula (or why there is none)."""
    card = present_result(dict(result))
    parts = [card.headline + "."]
    if card.formula:
        parts.append(card.formula + ".")
    if card.body and result.get("tam") is None:
        parts.append(card.body)
    return ai("\n\n".join(parts))
