"""Validation of answers and start values: regions, ISO 4217 currencies, bounded numbers.

Every function returns ``(value, None)`` for a good value or ``(None, reason)`` where the
reason names the bad value and what would be accepted, so ``observe_user`` can put it in
the next question and ``make_input`` in its form errors.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from planner.acquisition.currencies import COMMON_CURRENCIES, ISO_4217
from planner.acquisition.profile import DEFAULT_PROFILE, FieldSpec, get_profile
from planner.acquisition.regions import COUNTRIES, country
from planner.questions import Checked, QuestionKind, check_number
from planner.questions import text_of as _text
from planner.search import corpus_regions
from planner.spec import StateField

__all__ = ["QUESTIONS", "Checked", "check_answer", "check_currency", "check_number", "check_region",
           "known_regions", "state_fields"]


def known_regions() -> list[str]:
    """Region names the planner can plan for: every country (ISO 3166-1), by name.

    The corpus knows figures for a few; for the others the planner asks the operator."""
    return [name for _, name in COUNTRIES]


def region_aliases() -> dict[str, str]:
    """Other names of the corpus's regions ("UK", "deutschland") -> the region's name."""
    return {alias.casefold(): r["name"] for r in corpus_regions()
            for alias in r.get("aliases", [])}


def check_region(raw: Any) -> Checked:
    """A country by name, ISO code or alias (any case) -> its canonical name."""
    text = _text(raw)
    if not text:
        return None, ("the answer was empty; type a country's name or two-letter code, "
                      "such as Portugal or PT")
    alias = region_aliases().get(text.casefold())
    found = country(alias or text)
    if found is not None:
        return found[1], None
    return None, (f"unknown region {text!r}; type a country's name or two-letter code, "
                  "such as Portugal or PT (the list suggests them as you type)")


def check_currency(raw: Any) -> Checked:
    """An ISO 4217 code (any case) -> the upper-case code."""
    text = _text(raw)
    if not text:
        return None, "the answer was empty; give an ISO 4217 code such as EUR or USD"
    code = text.upper()
    if code in ISO_4217:
        return code, None
    return None, (
        f"{text!r} is not an ISO 4217 currency code; use a three-letter code such as "
        f"{', '.join(COMMON_CURRENCIES[:6])}"
    )


def check_answer(spec: FieldSpec, raw: Any) -> Checked:
    """Validate ``raw`` as a value of field ``spec``."""
    if spec.kind == "region":
        return check_region(raw)
    if spec.kind == "currency":
        return check_currency(raw)
    if spec.kind == "number":
        return check_number(raw, low=spec.min_value, high=spec.max_value,
                            percent=spec.max_value == 1)
    text = _text(raw)
    return (text, None) if text else (None, "the answer was empty; please type an answer")


def state_fields(state: Mapping[str, Any]) -> dict[str, tuple[StateField, ...]]:
    """The ``values`` channel's fields (the run's profile's), each checked as its question
    and the start form check it (:func:`check_answer`)."""
    try:
        profile = get_profile(str(state.get("profile") or DEFAULT_PROFILE))
    except KeyError:
        profile = get_profile(DEFAULT_PROFILE)
    return {"values": tuple(
        StateField(spec.name, spec.label, functools.partial(check_answer, spec),
                   hint=spec.unit or "")
        for spec in profile.fields)}


QUESTIONS: dict[str, QuestionKind] = {
    "region": QuestionKind("suggest", lambda question, raw: check_region(raw),
                           hint="Type to search the countries; any country is accepted."),
    "currency": QuestionKind("suggest", lambda question, raw: check_currency(raw),
                             hint="A three-letter ISO 4217 code such as EUR or USD."),
}
"""The question kinds this graph asks beyond the generic ones, checked as ``observe_user``
checks them."""
