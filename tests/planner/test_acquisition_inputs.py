"""The start form (make_input) and the answer validators."""

from __future__ import annotations

import math

import pytest

from planner.acquisition.inputs import DEFAULT_GOAL, make_input
from planner.acquisition.profile import MARKET_SIZING
from planner.acquisition.validation import check_answer, check_currency, check_number
from planner.registry import InputError
from planner.spec import InputField


def errors_of(data: dict[str, object]) -> dict[str, str]:
    with pytest.raises(InputError) as info:
        make_input(data)
    return info.value.errors


def test_defaults_give_a_runnable_state() -> None:
    state = make_input({})
    assert state["goal"] == DEFAULT_GOAL and state["profile"] == "market_sizing"
    assert state["values"] == {} and state["max_iters"] == 20
    assert state["iterations"] == 0 and state["status"] == "running"
    assert state["decisions"] == [] and state["result"] is None


def test_web_form_strings_are_accepted() -> None:
    state = make_input({"goal": " Size it ", "profile": "market_sizing", "region": "de",
                        "currency": "gbp", "max_iters": "15"})
    assert state["goal"] == "Size it" and state["max_iters"] == 15
    assert state["values"] == {"core.region": "Germany", "core.currency": "GBP"}
    assert state["sources"] == {"core.region": "input", "core.currency": "input"}


def test_blank_optional_fields_mean_ask_later() -> None:
    state = make_input({"region": "", "currency": "  ", "max_iters": ""})
    assert state["values"] == {} and state["max_iters"] == 20


@pytest.mark.parametrize(("data", "field", "fragment"), [
    ({"region": "Atlantis"}, "region", "unknown region 'Atlantis'; type a country's name"),
    ({"currency": "XYZ"}, "currency", "'XYZ' is not an ISO 4217 currency code"),
    ({"profile": "saas"}, "profile", "'saas' is not one of: market_sizing"),
    ({"goal": "   "}, "goal", "the goal is empty"),
    ({"max_iters": "many"}, "max_iters", "'many' is not a whole number"),
    ({"max_iters": 0}, "max_iters", "0 is out of range; use 1 to 100"),
    ({"goal": "x" * 4001}, "goal", "the goal is 4,001 characters long; keep it to 4,000"),
    ({"max_iters": 101}, "max_iters", "101 is out of range"),
    ({"max_iters": True}, "max_iters", "True is not a whole number"),
    ({"colour": "red"}, "__all__", "unknown input field(s) 'colour'; accepted fields: goal"),
])
def test_bad_input_names_the_value_and_the_way_out(data: dict[str, object], field: str,
                                                   fragment: str) -> None:
    assert fragment in errors_of(data)[field]


def test_all_errors_are_reported_together() -> None:
    assert set(errors_of({"region": "Mars", "currency": "??", "max_iters": -1})) == {
        "region", "currency", "max_iters"}


@pytest.mark.parametrize(("raw", "value"), [
    ("12.5", 12.5), (12.5, 12.5), ("1,000", 1000), (" 7 ", 7), ("1_000", 1000), (3, 3),
])
def test_numbers_from_text_or_json(raw: object, value: float) -> None:
    assert check_number(raw) == (value, None)


@pytest.mark.parametrize(("raw", "fragment"), [
    ("abc", "'abc' is not a number"), ("", "empty"), (None, "empty"), (True, "not a number"),
    (math.nan, "not a finite number"), ("inf", "not a finite number"),
])
def test_non_numbers_are_rejected_with_a_reason(raw: object, fragment: str) -> None:
    value, reason = check_number(raw)
    assert value is None and fragment in reason


def test_numbers_out_of_range_name_the_bounds() -> None:
    assert check_number(5, low=0, high=1) == (None, "5 is out of range; give a number from 0 to 1")
    assert check_number(-1, low=0)[1] == "-1 is out of range; give a number of at least 0"


def test_adoption_rate_accepts_percentages_as_fractions() -> None:
    rate = MARKET_SIZING.field("market.adoption_rate")
    assert check_answer(rate, "18%") == (pytest.approx(0.18), None)
    assert check_answer(rate, "18")[1] == "18 is out of range; give a number from 0 to 1"


def test_currency_codes_are_iso_4217() -> None:
    assert check_currency(" chf ") == ("CHF", None)
    assert check_currency("ABC")[0] is None
    assert check_currency("")[1].startswith("the answer was empty")


@pytest.mark.parametrize("raw", ["1e30", -(2**64), "9223372036854775807"])
def test_a_whole_number_past_64_bits_is_out_of_range_naming_the_bound(raw: object) -> None:
    field = InputField(name="n", label="N", kind="integer")  # no bounds of its own
    with pytest.raises(ValueError, match=r"out of range; a whole number here is at most "
                                         r"9,223,372,036,854,774,784 either way"):
        field.clean(raw)
    assert field.clean("9223372036854774784") == 2**63 - 1024
