"""Validate a read plan as a DAG: unique ids, known dependencies, no cycles.

Each plan level (a plan, or the nested ``sub_tasks`` of one task) is its own namespace,
as in WriteHERE; a ``{"from_sub_goal": id, "slot": name}`` input also counts as a
dependency on that id (F02), so the referenced output exists before the task runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from planner.decomposition.errors import CycleError, DuplicateTaskError, UnknownDependencyError
from planner.decomposition.parsing import ParsedPlan, PlannedTask, read_plan

UnknownDependencyPolicy = Literal["error", "drop"]
UNKNOWN_DEPENDENCY_POLICIES: tuple[str, ...] = ("error", "drop")


def is_slot_ref(value: Any) -> bool:
    """Whether ``value`` is an F02 reference to another task's output slot."""
    return isinstance(value, Mapping) and "from_sub_goal" in value and "slot" in value


def slot_refs(inputs: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every ``(input name, reference)`` pair among ``inputs`` (top level only)."""
    for name, value in inputs.items():
        if is_slot_ref(value):
            yield name, value


def find_cycle(graph: Mapping[str, Sequence[str]]) -> list[str] | None:
    """The first dependency cycle in ``graph`` (id -> deps) as a path, or ``None``."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    for root in graph:
        if state.get(root):
            continue
        path: list[str] = [root]
        stack: list[Iterator[str]] = [iter(graph.get(root, ()))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                # The path is written in dependency order: a depends on b depends on … a.
                return [*path[path.index(nxt) :], nxt]
            if not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(graph.get(nxt, ())))
    return None


def longest_chain(graph: Mapping[str, Sequence[str]]) -> int:
    """Number of tasks on the longest dependency chain of an acyclic ``graph``."""
    memo: dict[str, int] = {}

    def depth(node: str, seen: frozenset[str]) -> int:
        if node in memo:
            return memo[node]
        deps = [d for d in graph.get(node, ()) if d in graph and d not in seen]
        value = 1 + max((depth(d, seen | {node}) for d in deps), default=0)
        memo[node] = value
        return value

    return max((depth(n, frozenset()) for n in graph), default=0)


def validate_plan(
    plan: ParsedPlan, *, unknown_dependencies: UnknownDependencyPolicy = "error"
) -> tuple[ParsedPlan, list[str]]:
    """Check ``plan`` is a DAG; return it (unknown deps dropped if asked) and what was dropped."""
    if unknown_dependencies not in UNKNOWN_DEPENDENCY_POLICIES:
        raise ValueError(
            f"unknown_dependencies must be one of {', '.join(UNKNOWN_DEPENDENCY_POLICIES)}, "
            f"got {unknown_dependencies!r}"
        )
    dropped: list[str] = []
    tasks = _validate_level(plan.tasks, "plan", unknown_dependencies, dropped)
    return replace(plan, tasks=tasks), dropped


def _validate_level(
    tasks: Sequence[PlannedTask], where: str, policy: str, dropped: list[str]
) -> tuple[PlannedTask, ...]:
    ids: list[str] = []
    for task in tasks:
        if task.id in ids:
            raise DuplicateTaskError(
                f"duplicate task id {task.id!r} in {where}; every task needs its own id"
            )
        ids.append(task.id)
    known = set(ids)
    cleaned = []
    for task in tasks:
        referenced = [str(ref["from_sub_goal"]) for _, ref in slot_refs(task.input)]
        wanted = list(dict.fromkeys([*task.deps, *referenced]))
        deps = []
        for dep in wanted:
            if dep in known:
                deps.append(dep)
            elif policy == "drop":
                dropped.append(f"{task.id}->{dep}")
            else:
                raise UnknownDependencyError(
                    f"task {task.id!r} in {where} depends on unknown task {dep!r}; "
                    f"known ids: {', '.join(ids)} (or drop unknown dependencies)"
                )
        children = (
            _validate_level(task.subtasks, f"sub_tasks of {task.id!r}", policy, dropped)
            if task.subtasks
            else ()
        )
        cleaned.append(replace(task, deps=tuple(deps), subtasks=children))
    cycle = find_cycle({t.id: t.deps for t in cleaned})
    if cycle:
        raise CycleError(cycle, where)
    return tuple(cleaned)


def parse_plan(
    raw: str | Mapping[str, Any] | list[Any],
    *,
    unknown_dependencies: UnknownDependencyPolicy = "error",
) -> ParsedPlan:
    """Read and validate a plan in any of the three forms; raise a ``PlanError`` subclass."""
    plan, _ = validate_plan(read_plan(raw), unknown_dependencies=unknown_dependencies)
    return plan
