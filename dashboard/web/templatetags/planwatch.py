"""Template filters of the Planwatch pages."""

from __future__ import annotations

import json

from django import template

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
def run_status_label(run: Run) -> str:
    """The run's status as people read it (see
    :func:`dashboard.web.presentation.header.status_label`)."""
    return header.status_label(run.status, getattr(run, "queue_position", None))


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
def run_elapsed(run: Run) -> str:
    """How long the run has run, start to end or now (see
    :func:`dashboard.web.presentation.header.elapsed`)."""
    return header.elapsed_text(run)


@register.filter
def as_json(value: object) -> str:
    """A state value as JSON (``null``, ``true``, ``"text"``), indented when nested."""
    nested = isinstance(value, dict | list) and bool(value)
    return json.dumps(value, indent=2 if nested else None, ensure_ascii=False, default=str)
