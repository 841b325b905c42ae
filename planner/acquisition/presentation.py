"""How the field-acquisition planner's result is shown: the TAM and where its inputs came from."""

from __future__ import annotations

from typing import Any

from planner.acquisition.profile import get_profile
from planner.acquisition.regions import goal_subject
from planner.presentation import ResultCard, ResultItem, generic_result_card
from planner.search import tokens

_ORIGINS = {"input": "given", "user": "answered", "calculator": "computed",
            "edited": "edited by an operator"}


def _origin(source: Any) -> tuple[str, str]:
    """(how the value was obtained, the detail: a search hit's source) for ``sources[f]``."""
    text = str(source or "")
    if text in _ORIGINS:
        return _ORIGINS[text], ""
    return ("searched", "" if text in ("", "search") else f"found in {text}")


def format_amount(value: Any, unit: str = "", *, share: bool = False) -> str:
    """A number for people: ``18.78 billion EUR``, ``12,345,678``, ``0.05 EUR``; a share
    (a 0-1 fraction) as a percentage: ``18%``, ``12.5%``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—" if value is None else str(value)
    if share:
        return f"{value * 100:.4g}%"
    suffix = f" {unit}" if unit else ""
    magnitude = abs(value)
    for size, word in ((1e12, "trillion"), (1e9, "billion"), (1e6, "million")):
        if magnitude >= size:
            return f"{value / size:,.2f} {word}{suffix}"
    if 0 < magnitude < 1:
        return f"{value:g}{suffix}"
    return f"{value:,.2f}{suffix}" if value % 1 else f"{int(value):,}{suffix}"


_GENERIC_WORDS = frozenset((
    "app", "apps", "application", "service", "services", "product", "products", "market",
    "markets", "subscription", "subscriptions", "the", "of", "for", "and", "in", "on", "to",
    "with", "users", "user", "people", "yearly", "monthly"))


def _topic_words(text: str) -> set[str]:
    """The distinctive words of a topic, singular ("rentals" -> "rental")."""
    words = {w.removesuffix("s") for w in tokens(text) if len(w) > 2}
    return words - {w.removesuffix("s") for w in _GENERIC_WORDS}


def off_topic(goal: str, title: str) -> str:
    """A warning when a source's title shares no distinctive word with the goal's subject."""
    subject = goal_subject(goal)
    wanted = _topic_words(subject)
    if not wanted or not title or wanted & _topic_words(title):
        return ""
    return (f"This source is about \u201c{title}\u201d, not {subject}: "
            "check the figure before you rely on it.")


def _unit(spec: Any, currency: str) -> str:
    """``"{currency} per year"`` as ``"EUR a year"``; a share has no unit (it is a %)."""
    return (spec.unit or "").replace("{currency}", currency).replace(" per year", " a year")


def present_result(output: Any) -> ResultCard:
    """The TAM with its currency, the formula with its numbers, and population x adoption x
    price with their sources (titled, flagged when about another topic than the goal)."""
    if not isinstance(output, dict) or "values" not in output:
        return generic_result_card(output)
    currency = str(output.get("currency") or "")
    values = output.get("values") or {}
    sources = output.get("sources") or {}
    evidence = output.get("evidence") or {}
    goal = str(output.get("goal") or "")
    profile = get_profile(str(output.get("profile") or "market_sizing"))
    tam = output.get("tam")
    if tam is not None:
        headline = f"TAM {format_amount(tam, currency)} a year"
    else:
        missing = ", ".join(output.get("missing") or ()) or "—"
        headline = f"No TAM: the run ended {output.get('status')} (missing: {missing})"
    items = []
    shown: dict[str, str] = {}
    for spec in profile.fields:
        if spec.strategy == "derived" or spec.name not in values:
            continue
        share = (spec.unit or "").startswith("share")
        value = format_amount(values[spec.name], "" if share else _unit(spec, currency),
                              share=share)
        shown[spec.name] = value
        origin, detail = _origin(sources.get(spec.name))
        found = evidence.get(spec.name) if origin == "searched" else None
        title = str((found or {}).get("title") or "")
        reference = f"{title} ({sources.get(spec.name)})" if title else ""
        about_goal = any("{subject}" in q for q in spec.queries)
        warning = off_topic(goal, title) if about_goal else ""
        items.append(ResultItem(label=spec.label, value=value, source=origin,
                                detail=detail if not reference else "",
                                reference=reference, warning=warning))
    formula = ""
    for spec in profile.derived:
        if all(c in shown for c in spec.components):
            names = " \u00d7 ".join(profile.field(c).label.lower() for c in spec.components)
            numbers = " \u00d7 ".join(shown[c] for c in spec.components)
            result = (f" = {format_amount(values.get(spec.name), _unit(spec, currency))}"
                      if values.get(spec.name) is not None else "")
            formula = f"TAM = {names} = {numbers}{result}"
    metrics = (
        ResultItem("status", str(output.get("status") or "—")),
        ResultItem("iterations", str(output.get("iterations") or 0)),
        ResultItem("decisions", str(output.get("decisions") or 0)),
    )
    reason = str(output.get("reason") or "")
    return ResultCard(headline=headline, items=tuple(items), formula=formula, body=reason,
                      metrics=metrics)
