"""A run's outcome beside its execution status: a graph that returned may still have failed
its goal (a decomposition's failed plan), as its ``GraphSpec.failed_when`` says.

LangGraph's statuses stay LangGraph's (the graph did return: ``success``); the outcome is
read beside them, from the run's output, by every page, the API, the export and the spans.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from planner.registry import all_graphs, get_graph

SUCCEEDED = "succeeded"


@dataclass(frozen=True)
class Outcome:
    """A finished run's goal failed: what it is called and why."""

    label: str
    """``plan failed``."""
    reason: str

    @property
    def headline(self) -> str:
        """The badge's words: ``Finished — plan failed``."""
        return f"Finished \u2014 {self.label}"

    def as_dict(self) -> dict[str, Any]:
        """The outcome as the API, the export and the LangGraph API's metadata give it."""
        return {"outcome": "failed", "label": self.label, "reason": self.reason}


def run_outcome(*, graph: str, status: str, output: Any) -> Outcome | None:
    """The failed outcome of a succeeded run whose output says its goal failed; else None."""
    if status != SUCCEEDED or not isinstance(output, dict):
        return None
    try:
        spec = get_graph(graph)
    except KeyError:  # a graph no longer registered: its runs keep their status
        return None
    reason = spec.goal_failure(output)
    return None if reason is None else Outcome(label=spec.failure_label, reason=reason)


def failed_outcome() -> Q:
    """Runs whose graph returned but whose output says the goal failed (for filters)."""
    found = Q(pk__in=[])
    for spec in all_graphs():
        if spec.failed_when:
            found |= Q(graph=spec.name, status=SUCCEEDED,
                       **{f"output__{key}": value for key, value in spec.failed_when.items()})
    return found
