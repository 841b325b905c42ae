"""A finished run's outcome as the trace shows it first: its result card, error or cancel.

The card's contents come from the graph's own presenter (``GraphSpec.present_result``);
this module only picks which of the three outcomes to show and gathers what each needs,
so the page, the socket and replay render the same ``_result_card.html`` from it.
"""

from __future__ import annotations

from typing import Any

from dashboard import selectors
from dashboard.models import Run, RunEvent
from planner.presentation import ResultCard, generic_result_card
from planner.registry import get_graph


def run_result(*, run: Run, tasks: dict[str, dict[str, Any]] | None = None
               ) -> dict[str, Any] | None:
    """What ``_result_card.html`` renders for a finished run; None while it is active.

    ``tasks`` (the folded task records, if the graph has any) say where a cancelled run
    stood: how many of its tasks were done, running or still pending.
    """
    if run.status == Run.Status.SUCCEEDED:
        outcome = run.told
        return {"kind": "succeeded", "card": result_card(graph=run.graph, output=run.output),
                "goal_failed": outcome.label if outcome else ""}
    if run.status == Run.Status.FAILED:
        return {"kind": "failed", "message": run.error_message or "The run failed.",
                "traceback": run.error_traceback}
    if run.status == Run.Status.CANCELLED:
        event = (selectors.run_events(run_id=run.id)
                 .filter(kind=RunEvent.Kind.RUN_CANCELLED).order_by("-seq").first())
        payload = event.payload if event is not None and isinstance(event.payload, dict) else {}
        return {"kind": "cancelled", "by": str(payload.get("by") or ""),
                "node": run.current_node, "seq": event.seq if event else run.last_seq,
                "last_seq": run.last_seq, "tasks": _task_counts(tasks or {}, graph=run.graph)}
    return None


def _task_counts(tasks: dict[str, dict[str, Any]], *, graph: str) -> list[tuple[str, int]]:
    """A cancelled run's tasks by status: those in flight or not started are cancelled (as
    the DAG, the timeline and the waterfall show them)."""
    try:
        view = get_graph(graph).task_view
    except KeyError:
        view = None
    stopped = (view.running, *view.not_started) if view is not None else ()
    counts: dict[str, int] = {}
    for task in tasks.values():
        if task.get("parent") is not None:  # the root is the goal, not a task of the plan
            status = str(task.get("status") or "pending")
            status = "cancelled" if status in stopped else status
            counts[status] = counts.get(status, 0) + 1
    return sorted(counts.items())


def result_card(*, graph: str, output: Any) -> ResultCard:
    """The graph's own card for ``output``; the generic one for a graph no longer registered
    or a presenter that cannot read this output (an older run's shape)."""
    try:
        spec = get_graph(graph)
    except KeyError:
        return generic_result_card(output)
    try:
        return spec.present_result(output)
    except Exception:  # an old output must still be shown, as it is
        return generic_result_card(output)


def run_goal(*, run: Run) -> str:
    """The goal a run was started with: the first non-blank text of its goal fields
    (:func:`dashboard.selectors.run_goal_fields`, which the runs list searches too)."""
    values = run.input if isinstance(run.input, dict) else {}
    for name in selectors.run_goal_fields(graph=run.graph):
        value = values.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""
