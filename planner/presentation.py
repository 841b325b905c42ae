"""How a graph's result is shown: a result card, declared by the graph, never by the host.

A graph's :class:`~planner.registry.GraphSpec` names two functions: ``output_of`` picks the
run's output from its final state (what the run stores, the API returns and the
``run_succeeded`` event carries), and ``present_result`` turns that output into a
:class:`ResultCard` the pages render. Graphs that declare neither (a user's own graph)
get the generic forms below: the final state, shown as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ResultItem:
    """One line of a result card: a labelled value and where it came from."""

    label: str
    value: str
    """The value formatted for people (``"€18.8 bn"``, ``"12,000,000"``)."""
    source: str = ""
    """Where the value came from: ``"searched"``, ``"answered"``, ``"given"``, ``"computed"`` …"""
    detail: str = ""
    """A longer note shown on demand (the search hit, the question asked …)."""


@dataclass(frozen=True)
class ResultCard:
    """What a finished run produced, as its graph wants it shown."""

    headline: str
    """One line that says the result (``"TAM €18.8 bn"``, ``"Synthesis of 12 tasks"``)."""
    items: tuple[ResultItem, ...] = ()
    """The inputs the result came from, in reading order."""
    body: str = ""
    """Longer text (a synthesis), shown as wrapped plain text."""
    metrics: tuple[ResultItem, ...] = field(default=())
    """Figures about the run (tasks planned, rounds, errors …)."""


def default_output(values: Any) -> Any:
    """A run's output: the state's ``result`` channel if it has one, else the whole state."""
    if isinstance(values, Mapping) and "result" in values:
        return values["result"]
    return values


def generic_result_card(output: Any) -> ResultCard:
    """The card of a graph that declares none: its output as indented JSON."""
    text = json.dumps(output, indent=2, ensure_ascii=False, default=str)
    return ResultCard(headline="Final state", body=text)
