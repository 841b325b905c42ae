"""How the field-acquisition planner's result is shown: the TAM and where its inputs came from."""

from __future__ import annotations

from typing import Any

from planner.acquisition.profile import get_profile
from planner.presentation import ResultCard, ResultItem, generic_result_card

_ORIGINS = {"input": "given", "user": "answered", "calculator": "computed",
            "edited": "edited by an operator"}


def _origin(source: Any) -> tuple[str, str]:
    """(how the value was obtained, the detail: a search hit's source) for ``sources[f]``."""
    text = str(source or "")
    if text in _ORIGINS:
        return _ORIGINS[text], ""
    return ("searched", "" if text in ("", "search") else f"found in {text}")


def format_amount(value: Any, unit: str = "") -> str:
    """A number for people: ``18.78 billion EUR``, ``12,345,678``, ``0.18 (18%)``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—" if value is None else str(value)
    suffix = f" {unit}" if unit else ""
    magnitude = abs(value)
    for size, word in ((1e12, "trillion"), (1e9, "billion"), (1e6, "million")):
        if magnitude >= size:
            return f"{value / size:,.2f} {word}{suffix}"
    if 0 < magnitude < 1:
        return f"{value:g} ({value:.1%}){suffix}"
    return f"{value:,.2f}{suffix}" if value % 1 else f"{int(value):,}{suffix}"


def present_result(output: Any) -> ResultCard:
    """The TAM with its currency, and population x adoption x price with their sources."""
    if not isinstance(output, dict) or "values" not in output:
        return generic_result_card(output)
    currency = str(output.get("currency") or "")
    values = output.get("values") or {}
    sources = output.get("sources") or {}
    profile = get_profile(str(output.get("profile") or "market_sizing"))
    tam = output.get("tam")
    if tam is not None:
        headline = f"TAM {format_amount(tam, currency)} a year"
    else:
        missing = ", ".join(output.get("missing") or ()) or "—"
        headline = f"No TAM: the run ended {output.get('status')} (missing: {missing})"
    items = []
    for spec in profile.fields:
        if spec.strategy == "derived" or spec.name not in values:
            continue
        # a share reads as a percentage already; "{currency} per year" as "EUR a year"
        unit = "" if (spec.unit or "").startswith("share") else (
            (spec.unit or "").replace("{currency}", currency).replace(" per year", " a year"))
        origin, detail = _origin(sources.get(spec.name))
        items.append(ResultItem(label=spec.label, value=format_amount(values[spec.name], unit),
                                source=origin, detail=detail))
    metrics = (
        ResultItem("status", str(output.get("status") or "—")),
        ResultItem("iterations", str(output.get("iterations") or 0)),
        ResultItem("decisions", str(output.get("decisions") or 0)),
    )
    reason = str(output.get("reason") or "")
    return ResultCard(headline=headline, items=tuple(items), body=reason, metrics=metrics)
