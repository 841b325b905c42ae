"""Facts derived from state and profile: missing fields, attempts, recipes, tasks, calculator.

Nothing here is stored in checkpoint state: recipes and tasks are recomputed from the
profile, the acquired values and the logs whenever a node needs them, so they can never
drift from the state they describe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.acquisition.profile import FieldSpec, Profile
from planner.acquisition.regions import goal_subject
from planner.acquisition.state import Decision, decision
from planner.search import tokens


@dataclass(frozen=True)
class Recipe:
    """The next step for acquiring one field: search with a query, or ask the user."""

    field: str
    action: str  # "search" | "ask_user"
    query: str | None = None


def fill(template: str, state: Mapping[str, Any]) -> str:
    """Put the run's region, currency and subject (what its goal is about) into a prompt
    or query template."""
    values = state.get("values") or {}
    return template.format(region=values.get("core.region") or "the region",
                           currency=values.get("core.currency") or "the currency",
                           subject=goal_subject(str(state.get("goal") or "")))


def normalize_query(query: str) -> str:
    """The form in which two queries count as the same (case, punctuation, spacing)."""
    return " ".join(tokens(query))


def search_count(state: Mapping[str, Any], field: str) -> int:
    """How many searches ran for ``field``."""
    return sum(1 for s in state.get("searches") or () if s.get("field") == field)


def ask_count(state: Mapping[str, Any], field: str) -> int:
    """How many answers (valid or not) were given for ``field``."""
    return sum(1 for a in state.get("answers") or () if a.get("field") == field)


def queries_run(state: Mapping[str, Any]) -> set[str]:
    """Every query searched so far, normalized."""
    return {normalize_query(s.get("query") or "") for s in state.get("searches") or ()}


def last_rejection(state: Mapping[str, Any], field: str) -> str | None:
    """Why the last answer for ``field`` was rejected, if it was."""
    for answer in reversed(state.get("answers") or []):
        if answer.get("field") == field:
            return None if answer.get("valid") else answer.get("reason")
    return None


def is_missing(state: Mapping[str, Any], field: str) -> bool:
    """Whether ``field`` has no value yet."""
    return (state.get("values") or {}).get(field) in (None, "")


def missing_fields(state: Mapping[str, Any], profile: Profile) -> list[str]:
    """Acquirable (non-derived) fields without a value, in profile order."""
    return [f.name for f in profile.fields
            if f.strategy != "derived" and is_missing(state, f.name)]


def recipe(state: Mapping[str, Any], profile: Profile, spec: FieldSpec) -> Recipe | None:
    """The next acquisition step for ``spec``, or None when its attempts are used up."""
    if spec.strategy == "derived":
        return None
    searches = search_count(state, spec.name)
    if spec.strategy == "web" and searches < min(profile.search_cap, len(spec.queries)):
        return Recipe(spec.name, "search", fill(spec.queries[searches], state))
    cap = profile.bootstrap_attempts if spec.strategy == "bootstrap" else profile.ask_cap
    if ask_count(state, spec.name) < cap:
        return Recipe(spec.name, "ask_user")
    return None


def acquisition_tasks(state: Mapping[str, Any], profile: Profile) -> list[Decision]:
    """Open tasks: missing, still acquirable components of the active decompositions."""
    tasks: list[Decision] = []
    for target, components in (state.get("dynamic_decompositions") or {}).items():
        for name in components:
            if not profile.has(name) or not is_missing(state, name):
                continue
            step = recipe(state, profile, profile.field(name))
            if step and all(t["field"] != name for t in tasks):
                tasks.append(decision(step.action, name, step.query,
                                      f"acquire {name}, an input of {target}"))
    return tasks


def missing_components(state: Mapping[str, Any], spec: FieldSpec) -> list[str]:
    """The inputs of a derived field that have no value yet."""
    return [c for c in spec.components if is_missing(state, c)]


def calculator_succeeded(state: Mapping[str, Any]) -> bool:
    """Whether the last calculation succeeded on the inputs the state holds now."""
    calc = state.get("calculation") or {}
    if calc.get("status") != "success":
        return False
    values = state.get("values") or {}
    return all(values.get(k) == v for k, v in (calc.get("inputs") or {}).items())


def calculator_blocked(state: Mapping[str, Any]) -> bool:
    """Whether the last calculation was blocked and its missing inputs are still missing."""
    calc = state.get("calculation") or {}
    return calc.get("status") == "blocked" and any(
        is_missing(state, name) for name in calc.get("missing") or ()
    )


def calculator_capped(state: Mapping[str, Any], profile: Profile) -> bool:
    """Whether the calculator ran as often as the profile allows."""
    return int(state.get("calc_runs") or 0) >= profile.calc_cap


def compose_schema(state: Mapping[str, Any], profile: Profile) -> dict[str, dict[str, Any]]:
    """Each field's strategy and status (filled | missing | exhausted | derived) for display."""
    schema: dict[str, dict[str, Any]] = {}
    for spec in profile.fields:
        if not is_missing(state, spec.name):
            status = "filled"
        elif spec.strategy == "derived":
            status = "derived"
        elif recipe(state, profile, spec) is None:
            status = "exhausted"
        else:
            status = "missing"
        entry: dict[str, Any] = {
            "label": spec.label, "strategy": spec.strategy, "kind": spec.kind,
            "status": status, "searches": search_count(state, spec.name),
            "asks": ask_count(state, spec.name),
        }
        if spec.components:
            entry["components"] = list(spec.components)
        schema[spec.name] = entry
    return schema


def compose_decompositions(state: Mapping[str, Any], profile: Profile) -> dict[str, list[str]]:
    """The active decompositions plus one for a derived field whose calculator is blocked."""
    result = {k: list(v) for k, v in (state.get("dynamic_decompositions") or {}).items()}
    calc = state.get("calculation") or {}
    target = calc.get("target")
    if (calculator_blocked(state) and isinstance(target, str) and profile.has(target)
            and target not in result):
        result[target] = list(profile.field(target).components)
    return result
