"""Plan-quality metrics (WriteHERE's ``analyze_plan``), recorded for every planning call.

Records are plain JSON (string keys everywhere) because they live in graph state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from planner.decomposition.dag import find_cycle, longest_chain
from planner.decomposition.parsing import PlannedTask


def _levels(tasks: Sequence[PlannedTask]) -> list[Sequence[PlannedTask]]:
    """Every plan level: the top level and each task's nested ``sub_tasks``."""
    out: list[Sequence[PlannedTask]] = [tasks]
    for task in tasks:
        if task.subtasks:
            out.extend(_levels(task.subtasks))
    return out


def _nesting(tasks: Sequence[PlannedTask]) -> int:
    return 1 + max((_nesting(t.subtasks) for t in tasks if t.subtasks), default=0) if tasks else 0


def plan_metrics(
    tasks: Sequence[PlannedTask],
    *,
    task_id: str,
    form: str | None,
    parse_retries: int = 0,
    error: str | None = None,
    dropped_dependencies: Sequence[str] = (),
    round_no: int = 0,
) -> dict[str, Any]:
    """One JSON record describing a plan's size, shape and how hard it was to read."""
    levels = _levels(tasks)
    flat = [t for level in levels for t in level]
    cycles = []
    depth = 0
    for level in levels:
        graph = {t.id: t.deps for t in level}
        cycle = find_cycle(graph)
        if cycle:
            cycles.append(cycle)
        else:
            depth = max(depth, longest_chain(graph))
    dep_counts = Counter(len(t.deps) for t in flat)
    return {
        "task_id": task_id,
        "form": form,
        "round": round_no,
        "ok": error is None,
        "error": error,
        "task_count": len(flat),
        "task_types": dict(Counter(t.task_type for t in flat)),
        "dependency_histogram": {str(k): dep_counts[k] for k in sorted(dep_counts)},
        "depth": depth,
        "levels": _nesting(tasks),
        "atomic_share": round(sum(t.atomic for t in flat) / len(flat), 3) if flat else 0.0,
        "cycles_found": len(cycles),
        "cycles": cycles,
        "parse_retries": parse_retries,
        "dropped_dependencies": list(dropped_dependencies),
    }
