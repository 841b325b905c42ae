"""Template filters of the Planwatch pages."""

from __future__ import annotations

import json
import math
from typing import Any

from django import template
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from dashboard.models import Run
from dashboard.web.presentation import header, results
from planner.registry import get_graph

register = template.Library()


@register.filter
def run_goal(run: Run) -> str:
    """The goal ``run`` was started with (see
    :func:`dashboard.web.presentation.results.run_goal`)."""
    return results.run_goal(run=run)


@register.filter
def run_status_label(run: Run | dict[str, Any]) -> str:
    """The run's status as people read it (see
    :func:`dashboard.web.presentation.header.status_label`)."""
    run = _as_run(run)
    outcome = run.told
    if outcome is not None:
        return outcome.headline
    return header.status_label(run.status, getattr(run, "queue_position", None))


@register.filter
def run_badge(run: Run | dict[str, Any]) -> str:
    """The class of the run's status badge: its status, or ``outcome-failed`` for a run
    whose graph returned but whose goal failed (or a budget stopped)."""
    run = _as_run(run)
    if run.told is not None:
        return "outcome-failed"
    return f"status-{run.status}"


@register.filter
def status_label(status: str) -> str:
    """A status value as people read it (a doorbell's summary carries only the value)."""
    return header.status_label(status)


@register.filter
def graph_title(name: str) -> str:
    """A graph's title as its spec gives it; its name if it is no longer registered."""
    try:
        return get_graph(name).title
    except KeyError:
        return name


@register.filter
def run_elapsed(run: Run | dict[str, Any]) -> str:
    """How long the run (or a doorbell's summary of it) has run, start to end or now (see
    :func:`dashboard.web.presentation.header.elapsed_text`)."""
    return header.elapsed_text(_as_run(run))


@register.filter
def run_clock(run: Run | dict[str, Any]) -> str:
    """When the clock of a run still going started (ISO 8601), for the page to tick; "" for
    a run not started or ended."""
    run = _as_run(run)
    return run.started_at.isoformat() if run.started_at and not run.is_finished else ""


@register.filter
def run_clocks(run: Run | dict[str, Any]) -> header.Clocks | None:
    """A listed run's working time and waits for people, from the figures the list read
    for it (``figures``: :func:`dashboard.selectors.runs_waits`); None without them."""
    figures = run.get("figures") if isinstance(run, dict) else getattr(run, "figures", None)
    if figures is None or not figures.known:
        return None
    return header.run_clocks(_as_run(run), figures)


def _as_run(run: Run | dict[str, Any]) -> Run:
    """A run, or a doorbell's summary of one (its times as ISO 8601) as an unsaved run."""
    if isinstance(run, Run):
        return run
    return Run(status=run["status"], started_at=parse_datetime(run.get("started_at") or ""),
               finished_at=parse_datetime(run.get("finished_at") or ""),
               graph=run.get("graph") or "", outcome=run.get("outcome"),
               outcome_reason=run.get("outcome_reason") or "")


@register.filter
def as_json(value: object) -> str:
    """A state value as JSON (``null``, ``true``, ``"text"``), indented when nested."""
    nested = isinstance(value, dict | list) and bool(value)
    return json.dumps(value, indent=2 if nested else None, ensure_ascii=False, default=str)


def age_text(seconds: float) -> str:
    """A wait as people say it, true to the unit: "40 s", "3 min", "2 h 5 min", "4 d"."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        h, m = divmod(s // 60, 60)
        return f"{h} h {m} min" if m else f"{h} h"
    return f"{s // 86400} d"


@register.filter
def ago(when: Any) -> str:
    """How long ago ``when`` was (see :func:`age_text`); "" for no time."""
    if not when:
        return ""
    return age_text((timezone.now() - when).total_seconds())


@register.filter
def wait_text(seconds: float | None) -> str:
    """A wait in seconds as people say it (see :func:`age_text`); "" when unknown."""
    return "" if seconds is None else age_text(seconds)


@register.filter
def compact_json(value: object) -> str:
    """A value as one line of JSON ("" for None): a decision in a table cell."""
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))


@register.filter
def usd(value: float | None) -> str:
    """A cost in USD with its significant digits: ``$1.24``, ``$0.0123``, ``$0.000036``
    (never ``$0.0000`` for a cost that is not 0); "" for None."""
    if value is None:
        return ""
    if value == 0:
        return "$0"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    if abs(value) >= 0.01:
        return f"${value:.4f}".rstrip("0")
    digits = -math.floor(math.log10(abs(value))) + 1  # two significant digits
    return f"${value:.{digits}f}"
