"""What ``decide`` sends the model: the structured-output schema, the prompt, the context.

The prompt is for real chat models; the context is the same facts as plain data, from
which the scripted offline model derives its answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from planner.acquisition import recipes
from planner.acquisition.profile import Profile
from planner.steering import PromptTemplate, render_prompt


class PlannerDecision(BaseModel):
    """The model's one structured answer: the next action, its target field and query."""

    action: Literal["search", "ask_user", "calculate", "reflect", "finish"]
    field: str | None = Field(default=None, description="target field name, e.g. market.price")
    query: str | None = Field(default=None, description="web search query for action=search")
    reason: str = Field(default="", description="one sentence: why this action")


def decide_context(state: Mapping[str, Any], profile: Profile) -> dict[str, Any]:
    """The facts the model decides on, as plain data."""
    fields = []
    for spec in profile.fields:
        step = recipes.recipe(state, profile, spec)
        fields.append({
            "name": spec.name, "label": spec.label, "strategy": spec.strategy,
            "missing": recipes.is_missing(state, spec.name),
            "value": (state.get("values") or {}).get(spec.name),
            "searches": recipes.search_count(state, spec.name),
            "asks": recipes.ask_count(state, spec.name),
            "next_step": step.action if step else None,
            "components": list(spec.components),
            "query_templates": [recipes.fill(q, state) for q in spec.queries],
        })
    return {
        "goal": state.get("goal", ""),
        "profile": profile.name,
        "region": (state.get("values") or {}).get("core.region"),
        "currency": (state.get("values") or {}).get("core.currency"),
        "iteration": state.get("iterations", 0),
        "search_cap": profile.search_cap,
        "ask_cap": profile.ask_cap,
        "fields": fields,
        "queries_run": sorted(recipes.queries_run(state)),
        "calculation": state.get("calculation"),
    }


DECIDE_PROMPT = PromptTemplate(
    name="decide", label="Decide prompt",
    template=(
        "You plan how to acquire the fields of a market-sizing estimate.\n"
        "Goal: {goal}\n"
        "Choose ONE next action: search (web search for a field; give a specific query "
        "naming the region), ask_user (ask the operator for a field), calculate (compute "
        "derived fields), reflect (the plan is stuck), or finish (everything is known).\n"
        "Prefer searching web fields before asking; never repeat a query in queries_run; "
        "derived fields are calculated, not searched.\n"
        "Facts as JSON:\n{facts}"),
    fields=("goal", "facts"),
    help="Asks the model for the next action; {facts} are the fields, their values and "
         "the searches run, as JSON.")
"""The ``decide`` node's prompt, overridable by name (``GraphSpec.prompts``)."""


def decide_prompt(context: Mapping[str, Any]) -> str:
    """The instruction a real chat model gets (the context is embedded as JSON; the run's
    own decide prompt, if it has one)."""
    return render_prompt(DECIDE_PROMPT, goal=context["goal"],
                         facts=json.dumps(context, indent=1, default=str))
