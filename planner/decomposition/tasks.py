"""Task records in graph state and their pure transitions (forge-lcdl's ``mark_*``).

A task record is a plain dict (see :func:`new_task`); ``tasks`` maps a global task id to
its record. Subtask ids are their parent's id, a dot and the plan's local id (``3.2``),
except for the root's children, which keep the plan's ids. Functions here never mutate
their input; they return new dicts, and :func:`diff` turns two versions into the small
per-task patches a node returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from planner.decomposition.dag import slot_refs
from planner.decomposition.errors import DuplicateTaskError
from planner.decomposition.parsing import TERMINAL_TASK_ID, PlannedTask

ROOT_ID = "root"
ROOT_TASK_TYPE = "plan"
ROOT_WORKER = "write"
"""Who executes a root goal whose plan came back empty: WriteHERE's root is a writing task."""
STATUSES: tuple[str, ...] = ("pending", "running", "ok", "err", "blocked", "skipped")
FINAL: frozenset[str] = frozenset({"ok", "err", "blocked", "skipped"})
ERROR_POLICIES: tuple[str, ...] = ("stop_on_first_error", "continue")

Tasks = dict[str, dict[str, Any]]


def new_task(
    *,
    task_id: str,
    goal: str,
    task_type: str,
    deps: Iterable[str] = (),
    atomic: bool,
    parent: str | None,
    depth: int,
    worker: str | None = None,
    inputs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A fresh ``pending`` task record (the dashboard draws these as the task DAG)."""
    return {
        "id": task_id,
        "goal": goal,
        "task_type": task_type,
        "deps": list(deps),
        "atomic": atomic,
        "status": "pending",
        "result": None,
        "error": None,
        "error_kind": None,
        "parent": parent,
        "depth": depth,
        "worker": worker,
        "round": None,
        "input": dict(inputs or {}),
        "attempts": 0,
        "errors": [],
        "forced_atomic": False,
        "accepted": None,
    }


def atomic_worker(task: Mapping[str, Any]) -> str:
    """The worker that executes ``task`` once it is atomic (the root's type is no worker)."""
    if task.get("worker"):
        return str(task["worker"])
    return ROOT_WORKER if task["task_type"] == ROOT_TASK_TYPE else str(task["task_type"])


def graft_plan(
    tasks: Mapping[str, Mapping[str, Any]],
    parent_id: str,
    planned: Iterable[PlannedTask],
    *,
    max_depth: int,
) -> Tasks:
    """New records for a plan of ``parent_id`` (nested ``sub_tasks`` included)."""
    parent = tasks[parent_id]
    prefix = "" if parent_id == ROOT_ID else f"{parent_id}."
    depth = int(parent["depth"]) + 1
    out: Tasks = {}
    for task in planned:
        gid = prefix + task.id
        if gid in tasks or gid in out:
            raise DuplicateTaskError(
                f"task id {gid!r} planned under {parent_id!r} already exists; "
                "use ids that are unique within the plan"
            )
        inputs = {
            name: {**value, "from_sub_goal": prefix + str(value["from_sub_goal"])}
            if name in dict(slot_refs(task.input))
            else value
            for name, value in task.input.items()
        }
        # The depth cap turns a task that would be planned again into one that is executed,
        # nested sub_tasks included (their plan is dropped: they would sit below the cap).
        forced = not task.atomic and depth >= max_depth
        record = new_task(
            task_id=gid,
            goal=task.goal,
            task_type=task.task_type,
            deps=[prefix + d for d in task.deps],
            atomic=task.atomic or forced,
            parent=parent_id,
            depth=depth,
            worker=task.worker if (task.atomic or forced) else None,
            inputs=inputs,
        )
        if forced:
            record["forced_atomic"] = True
            record["worker"] = task.worker or task.task_type
        out[gid] = record
        if task.subtasks and not forced:
            view = {**tasks, **out}
            out.update(graft_plan(view, gid, task.subtasks, max_depth=max_depth))
    return out


def children_of(tasks: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """Parent id -> ids of its subtasks, in plan order."""
    index: dict[str, list[str]] = {}
    for tid, task in tasks.items():
        if task.get("parent") is not None:
            index.setdefault(task["parent"], []).append(tid)
    return index


def done_for_dependents(task: Mapping[str, Any]) -> bool:
    """Whether ``task`` lets its dependents run: ``ok``, or a failure F02 accepted."""
    return task["status"] == "ok" or (task["status"] == "err" and task.get("accepted") is True)


def ready_ids(tasks: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Pending tasks whose every dependency is done for them and whose parent is running."""
    out = []
    for tid, task in tasks.items():
        if task["status"] != "pending":
            continue
        parent = task.get("parent")
        if parent is not None and tasks[parent]["status"] != "running":
            continue
        if all(done_for_dependents(tasks[d]) for d in task["deps"]):
            out.append(tid)
    return out


def is_terminal_node(task: Mapping[str, Any]) -> bool:
    """Whether ``task`` is a forge-lcdl terminal node (completes with its own input)."""
    return task.get("worker") == TERMINAL_TASK_ID


def _close_parent(task: dict[str, Any], kids: list[dict[str, Any]]) -> None:
    if all(done_for_dependents(k) for k in kids):
        texts = [k["result"]["text"] for k in kids if k["status"] == "ok"
                 and isinstance(k["result"], dict) and isinstance(k["result"].get("text"), str)]
        result: dict[str, Any] = {"subtasks": [k["id"] for k in kids],
                                  "text": "\n\n".join(texts)}
        accepted = [k["id"] for k in kids if k["status"] == "err"]
        if accepted:  # partial success: F02 accepted these failures
            result["accepted_failures"] = accepted
        task.update(status="ok", error=None, result=result)
        return
    for status, verb in (("err", "failed"), ("blocked", "is blocked"), ("skipped", "was skipped")):
        culprit = next((k for k in kids if k["status"] == status), None)
        if culprit is not None:
            task.update(status=status, error_kind="subtask",
                        error=f"subtask {culprit['id']} {verb}: {culprit['error']}")
            return


def settle(tasks: Mapping[str, Mapping[str, Any]], *, policy: str) -> Tasks:
    """Block dependents of failures, close finished parents, and apply the error policy.

    ``continue``: dependents of an ``err`` or ``blocked`` task become ``blocked``; other
    branches go on. ``stop_on_first_error``: the same, and every other task that has not
    run yet becomes ``skipped``. A parent closes when all its subtasks are final: ``ok`` if
    all are ``ok`` or accepted failures, else the worst of ``err`` > ``blocked`` >
    ``skipped``. A failure F02 accepted (``accepted``) blocks nothing and stops nothing.
    """
    if policy not in ERROR_POLICIES:
        raise ValueError(f"error policy {policy!r} is unknown; use one of {ERROR_POLICIES}")
    out: Tasks = {tid: dict(task) for tid, task in tasks.items()}
    _propagate(out)
    failed = next((t for t in out.values() if _unaccepted_failure(t)), None)
    if policy == "stop_on_first_error" and failed is not None:
        reason = f"run stopped after task {failed['id']} failed (stop_on_first_error)"
        # A parent that holds a failed subtask will fail once closed, so whatever depends
        # on that parent is a descendant of the failure: blocked, not merely skipped.
        doomed: dict[str, str] = {}
        for task in out.values():
            if _unaccepted_failure(task):
                parent = task["parent"]
                while parent is not None:
                    doomed.setdefault(parent, task["id"])
                    parent = out[parent]["parent"]
        for task in out.values():
            hit = next((d for d in task["deps"] if d in doomed), None)
            if task["status"] == "pending" and hit is not None:
                task.update(status="blocked", error_kind="dependency",
                            error=f"dependency {hit} contains failed task {doomed[hit]}")
        _propagate(out)
        for task in out.values():
            if task["status"] == "pending":
                task.update(status="skipped", error=reason, error_kind="stopped")
        _propagate(out)
    return out


def _unaccepted_failure(task: Mapping[str, Any]) -> bool:
    return task["status"] == "err" and task.get("accepted") is not True


def _propagate(out: Tasks) -> None:
    kids = children_of(out)
    changed = True
    while changed:
        changed = False
        for task in out.values():
            if task["status"] == "pending":
                for dep in task["deps"]:
                    dep_status = out[dep]["status"]
                    if done_for_dependents(out[dep]):
                        continue
                    if dep_status in ("err", "blocked", "skipped"):
                        # A skipped dependency can never produce its output either.
                        status = "skipped" if dep_status == "skipped" else "blocked"
                        task.update(status=status, error_kind="dependency",
                                    error=f"dependency {dep} is {dep_status}")
                        changed = True
                        break
            elif task["status"] == "running" and not task["atomic"]:
                sub = [out[k] for k in kids.get(task["id"], [])]
                if sub and all(k["status"] in FINAL for k in sub):
                    _close_parent(task, sub)
                    changed = True


def stop_all(tasks: Mapping[str, Mapping[str, Any]], *, reason: str) -> Tasks:
    """Skip every task that has not finished (max rounds, nothing runnable) and close parents."""
    out: Tasks = {tid: dict(task) for tid, task in tasks.items()}
    for task in out.values():
        if task["status"] == "pending" or (task["status"] == "running" and task["atomic"]):
            task.update(status="skipped", error=reason, error_kind="stopped")
    _propagate(out)
    return out


def diff(old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]]) -> Tasks:
    """Per-task patches holding only the fields that changed (new tasks in full)."""
    patches: Tasks = {}
    for tid, task in new.items():
        before = old.get(tid)
        if before is None:
            patches[tid] = dict(task)
            continue
        changed = {k: v for k, v in task.items() if before.get(k) != v}
        if changed:
            patches[tid] = changed
    return patches


def status_counts(tasks: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """How many tasks are in each status (every status listed, zeros included)."""
    counts = dict.fromkeys(STATUSES, 0)
    for task in tasks.values():
        counts[task["status"]] = counts.get(task["status"], 0) + 1
    return counts
