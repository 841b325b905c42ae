"""The start form of the acquisition planner and its conversion into the initial state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.acquisition.graph import GRAPH_VERSION
from planner.acquisition.profile import CURRENCY, PROFILES, REGION
from planner.acquisition.state import AcquisitionState, initial_state
from planner.acquisition.validation import check_currency, check_region, known_regions
from planner.registry import InputError, InputField

DEFAULT_GOAL = ("Estimate the yearly total addressable market (TAM) of a subscription "
                "budgeting app in one region.")
DEFAULT_PROFILE = "market_sizing"
DEFAULT_MAX_ITERS = 20
MAX_ITERS_LIMIT = 100

INPUT_FIELDS: tuple[InputField, ...] = (
    InputField("goal", "Goal", kind="textarea", default=DEFAULT_GOAL,
               help="What the run should estimate; shown to the model."),
    InputField("profile", "Profile", kind="choice", default=DEFAULT_PROFILE,
               choices=tuple(sorted(PROFILES)),
               help="Which fields to acquire and how."),
    InputField("region", "Region", kind="choice", required=False, default="",
               choices=tuple(known_regions()),
               help="Leave empty to be asked; a region skips that question."),
    InputField("currency", "Currency", kind="text", required=False, default="",
               help="ISO 4217 code such as EUR or USD; leave empty to be asked."),
    InputField("max_iters", "Max iterations", kind="integer", default=DEFAULT_MAX_ITERS,
               min_value=1, max_value=MAX_ITERS_LIMIT,
               help="Loop iterations before the planner stops and reports what it has."),
)


def make_input(data: Mapping[str, Any]) -> AcquisitionState:
    """Turn start-form or API values into the initial state; ``InputError`` on bad input."""
    errors: dict[str, str] = {}
    allowed = [f.name for f in INPUT_FIELDS]
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        errors["__all__"] = (f"unknown input field(s) {', '.join(map(repr, unknown))}; "
                             f"accepted fields: {', '.join(allowed)}")

    goal = data.get("goal")
    goal = DEFAULT_GOAL if goal is None else str(goal).strip()
    if not goal:
        errors["goal"] = "the goal is empty; describe what to estimate or keep the default"

    profile = data.get("profile") or DEFAULT_PROFILE
    if profile not in PROFILES:
        errors["profile"] = (f"unknown profile {profile!r}; choose one of: "
                             f"{', '.join(sorted(PROFILES))}")

    values: dict[str, Any] = {}
    for name, key, check in (("region", REGION, check_region),
                             ("currency", CURRENCY, check_currency)):
        raw = data.get(name)
        if raw is None or str(raw).strip() == "":
            continue
        value, reason = check(raw)
        if reason:
            errors[name] = reason
        else:
            values[key] = value

    max_iters = _integer(data.get("max_iters"), errors)

    if errors:
        raise InputError(errors)
    return initial_state(goal=goal, profile=str(profile), max_iters=max_iters,
                         version=GRAPH_VERSION, values=values)


def _integer(raw: Any, errors: dict[str, str]) -> int:
    """max_iters as an int in 1..MAX_ITERS_LIMIT (text from a form is accepted)."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return DEFAULT_MAX_ITERS
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, float) and raw.is_integer():
        value = int(raw)
    elif isinstance(raw, str):
        try:
            value = int(raw.strip())
        except ValueError:
            value = None
    if value is None:
        errors["max_iters"] = (f"{raw!r} is not a whole number; give an integer from 1 "
                               f"to {MAX_ITERS_LIMIT}")
        return DEFAULT_MAX_ITERS
    if not 1 <= value <= MAX_ITERS_LIMIT:
        errors["max_iters"] = (f"{value} is out of range; give an integer from 1 "
                               f"to {MAX_ITERS_LIMIT}")
    return value
