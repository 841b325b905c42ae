"""Validation of answers and start values: regions, ISO 4217 currencies, bounded numbers.

Every function returns ``(value, None)`` for a good value or ``(None, reason)`` where the
reason names the bad value and what would be accepted, so ``observe_user`` can put it in
the next question and ``make_input`` in its form errors.
"""

from __future__ import annotations

import math
import re
from typing import Any

from planner.acquisition.currencies import COMMON_CURRENCIES, ISO_4217
from planner.acquisition.profile import FieldSpec
from planner.search import corpus_regions

_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$")

Checked = tuple[Any, None] | tuple[None, str]


def known_regions() -> list[str]:
    """Region names the planner can plan for (those the shipped corpus knows)."""
    return [r["name"] for r in corpus_regions()]


def check_region(raw: Any) -> Checked:
    """A known region by name, ISO code or alias (any case) -> its canonical name."""
    text = _text(raw)
    if not text:
        return None, f"the answer was empty; choose one of: {', '.join(known_regions())}"
    wanted = text.casefold()
    for region in corpus_regions():
        names = [region["name"], region["code"], *region.get("aliases", [])]
        if wanted in (n.casefold() for n in names):
            return region["name"], None
    return None, f"unknown region {text!r}; choose one of: {', '.join(known_regions())}"


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


def check_number(raw: Any, *, low: float | None = None, high: float | None = None,
                 percent: bool = False) -> Checked:
    """A finite number (a number, or text like ``"12.5"``, ``"1,000"``) within bounds.

    With ``percent``, ``"18%"`` means 0.18 (shares are stored as fractions).
    """
    if isinstance(raw, bool):
        return None, f"{raw!r} is not a number; give a number such as 12.5"
    if isinstance(raw, int | float):
        value = float(raw)
    else:
        text = _text(raw)
        if not text:
            return None, "the answer was empty; give a number such as 12.5"
        scale = 1.0
        if percent and text.endswith("%"):
            text, scale = text[:-1].strip(), 0.01
        if _THOUSANDS.match(text):
            text = text.replace(",", "")
        try:
            value = float(text.replace("_", "")) * scale
        except ValueError:
            return None, f"{_text(raw)!r} is not a number; give a number such as 12.5"
    if not math.isfinite(value):
        return None, f"{raw!r} is not a finite number; give a number such as 12.5"
    if (low is not None and value < low) or (high is not None and value > high):
        return None, f"{_fmt(value)} is out of range; give a number {_bounds(low, high)}"
    return (int(value) if value.is_integer() and abs(value) < 2**53 else value), None


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


def _text(raw: Any) -> str:
    return "" if raw is None else str(raw).strip()


def _bounds(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"from {_fmt(low)} to {_fmt(high)}"
    return f"of at least {_fmt(low)}" if low is not None else f"of at most {_fmt(high)}"


def _fmt(value: float | None) -> str:
    if value is None:
        return "any"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"
