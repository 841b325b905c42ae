"""The start form of the acquisition planner and its conversion into the initial state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.acquisition.graph import GRAPH_VERSION
from planner.acquisition.profile import CURRENCY, DEFAULT_PROFILE, PROFILES, REGION
from planner.acquisition.state import AcquisitionState, initial_state
from planner.acquisition.validation import check_currency, check_region, known_regions
from planner.chat import opening_messages, split_messages
from planner.spec import InputField, clean_inputs

DEFAULT_GOAL = ("Estimate the yearly total addressable market (TAM) of a subscription "
                "budgeting app in one region.")
DEFAULT_MAX_ITERS = 20
MAX_ITERS_LIMIT = 100

INPUT_FIELDS: tuple[InputField, ...] = (
    InputField("goal", "Goal", kind="textarea", default=DEFAULT_GOAL,
               help="What the run should estimate; shown to the model."),
    InputField("profile", "Profile", kind="choice", default=DEFAULT_PROFILE,
               choices=tuple(sorted(PROFILES)),
               help="Which fields to acquire and how."),
    InputField("region", "Region", kind="choice", required=False, default="",
               choices=tuple(known_regions()), check=check_region,
               help="Leave empty to be asked; a region skips that question."),
    InputField("currency", "Currency", kind="text", required=False, default="",
               max_length=20, check=check_currency,
               help="ISO 4217 code such as EUR or USD; leave empty to be asked."),
    InputField("max_iters", "Max iterations", kind="integer", default=DEFAULT_MAX_ITERS,
               min_value=1, max_value=MAX_ITERS_LIMIT,
               help="Loop iterations before the planner stops and reports what it has."),
)


def make_input(data: Mapping[str, Any]) -> AcquisitionState:
    """Turn start-form or API values into the initial state; ``InputError`` on bad input.

    A chat client's ``messages`` open the transcript (else the goal does)."""
    rest, sent = split_messages(data)
    cleaned = clean_inputs(INPUT_FIELDS, rest)
    values = {key: cleaned[name] for name, key in (("region", REGION), ("currency", CURRENCY))
              if cleaned[name]}
    return initial_state(goal=cleaned["goal"], profile=cleaned["profile"],
                         max_iters=cleaned["max_iters"], version=GRAPH_VERSION, values=values,
                         messages=opening_messages(sent, cleaned["goal"]))
