"""Trace reads and shaping: a graph's topology, and what a run's event log says about it.

Everything the trace view shows is folded from the event log (``TraceFold``), so the page
load, the websocket and the replay draw the same thing from the same rows: node visit
counts, the node running now, the edges taken, and what the graph's ``GraphSpec`` declares:
its task DAG and its decision records.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.utils import timezone

from dashboard import selectors
from dashboard.checkpoints import checkpoint_get
from dashboard.models import Run, RunEvent
from dashboard.runs.record import event_dict
from dashboard.web.presentation.timeline import Timeline, replay_stops, timeline_rows
from dashboard.web.presentation.waterfall import WaterfallFold, waterfall_view
from planner.registry import GraphSpec, TaskView, get_graph

Kind = RunEvent.Kind
START, END = "__start__", "__end__"
# what a task is shown as once its run waits or has stopped (the graph's own statuses aside)
WAITING, CANCELLED = "waiting", "cancelled"
FINISH_KINDS = {Kind.RUN_SUCCEEDED, Kind.RUN_FAILED, Kind.RUN_CANCELLED}
COMPACT_FROM = 60
"""A DAG of more tasks than this is drawn compact (smaller cards)."""


@dataclass(frozen=True)
class Topology:
    """A compiled graph's nodes and edges, and the Mermaid text that draws them."""

    nodes: tuple[str, ...]
    edges: tuple[tuple[str, str, bool], ...]
    mermaid: str


def dom_id(name: str) -> str:
    """A name made safe for an HTML id and a Mermaid node id (``3.2`` → ``3_2``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


@functools.cache
def graph_topology(graph: str) -> Topology:
    """The topology of registered graph ``graph`` (subgraphs expanded), drawn once."""
    spec = get_graph(graph)
    drawable = spec.inspection_graph.get_graph(xray=True)
    nodes = tuple(drawable.nodes)
    edges = tuple((e.source, e.target, bool(e.conditional)) for e in drawable.edges)
    return Topology(nodes=nodes, edges=edges, mermaid=_mermaid(nodes, edges))


def _mermaid(nodes: tuple[str, ...], edges: tuple[tuple[str, str, bool], ...]) -> str:
    """Mermaid flowchart text; ``parent:child`` nodes are nested in a ``parent`` subgraph."""
    lines = ["flowchart TD"]
    nested: dict[str, list[str]] = {}
    for name in nodes:
        if ":" in name:
            nested.setdefault(name.split(":", 1)[0], []).append(name)
            continue
        label = {START: "start", END: "end"}.get(name, name)
        shape = f'(["{label}"])' if name in (START, END) else f'["{label}"]'
        lines.append(f"  n_{dom_id(name)}{shape}")
    for parent, children in nested.items():
        lines.append(f'  subgraph sg_{dom_id(parent)}["{parent}"]')
        lines.extend(f'    n_{dom_id(c)}["{c.split(":", 1)[1]}"]' for c in children)
        lines.append("  end")
    for source, target, conditional in edges:
        arrow = "-.->" if conditional else "-->"
        lines.append(f"  n_{dom_id(source)} {arrow} n_{dom_id(target)}")
    return "\n".join(lines)


@dataclass
class Changes:
    """What one batch of events changed, so a socket sends only the panels that moved."""

    graph: bool = False
    tasks: set[str] = field(default_factory=set)
    new_tasks: bool = False
    """Every task card is drawn again (the run's phase moved, or the DAG's layout did)."""
    plans: set[str] = field(default_factory=set)
    """Plans that got new tasks: drawn again (or added) alone, not the whole DAG."""
    added: set[str] = field(default_factory=set)
    """The tasks that are new."""
    decisions: bool = False
    interrupts: bool = False
    status: bool = False
    waterfall: bool = False


@dataclass
class TraceFold:
    """What a run's events say so far: visits, current node, edges taken, tasks, decisions."""

    edges: frozenset[tuple[str, str]] = frozenset()
    last_seq: int = 0
    visits: dict[str, int] = field(default_factory=dict)
    current: str = ""
    failed: set[str] = field(default_factory=set)
    taken: set[tuple[str, str]] = field(default_factory=set)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    task_view: TaskView | None = None
    decisions_channel: str = ""
    phase: str = ""
    """Where the run stands at the last folded event: running, waiting, paused or stopped."""
    waterfall: WaterfallFold = field(default_factory=WaterfallFold)
    timeline: Timeline = field(default_factory=Timeline)
    """The events grouped by node execution (the timeline's rows)."""
    _step: int | None = None
    _step_nodes: set[str] = field(default_factory=lambda: {START})
    _prev_nodes: set[str] = field(default_factory=set)

    def apply(self, events: Iterable[dict[str, Any]]) -> Changes:
        """Fold events (``event_dict`` form) with a seq after ``last_seq``, in order."""
        changes = Changes()
        for event in events:
            if event["seq"] <= self.last_seq:
                continue  # seen already: a replayed or duplicated doorbell
            self.last_seq = event["seq"]
            self._apply_one(event, changes)
            self.waterfall.add(event)
            self.timeline.add(event)
            changes.waterfall = True
        return changes

    def _apply_one(self, event: dict[str, Any], changes: Changes) -> None:
        kind, node, ns = event["kind"], event["node"], event["namespace"]
        name = f"{ns.split(':', 1)[0]}:{node}" if ns and node else node
        if kind == Kind.NODE_STARTED:
            self.visits[name] = self.visits.get(name, 0) + 1
            if not ns:
                self._enter(node, event.get("step"))
            changes.graph = True
        elif kind == Kind.NODE_FINISHED:
            update = (event.get("payload") or {}).get("update")
            if isinstance(update, dict):
                self._absorb(update, changes)
        elif kind == Kind.NODE_FAILED:
            self.failed.add(name)
            changes.graph = True
        elif kind in (Kind.INTERRUPT_RAISED, Kind.INTERRUPT_ANSWERED):
            changes.interrupts = True
            if kind == Kind.INTERRUPT_RAISED:
                self._enter_phase("waiting", changes)
        if kind in FINISH_KINDS:
            self.current = ""
            if kind == Kind.RUN_SUCCEEDED:
                self.taken.update((n, END) for n in self._step_nodes if (n, END) in self.edges)
            changes.graph = changes.status = True
            self._enter_phase("succeeded" if kind == Kind.RUN_SUCCEEDED else "stopped", changes)
        elif kind in (Kind.RUN_STARTED, Kind.RUN_RESUMED, Kind.RUN_RECOVERED, Kind.RUN_FORKED):
            changes.status = True
            self._enter_phase("running", changes)
        elif kind == Kind.RUN_PAUSED:
            # the picture marks where the run stands, as the header does: the node it
            # paused after, or else the one it will run next (not the last one started)
            payload = event.get("payload") or {}
            before = payload.get("before") or []
            self.current = payload.get("after") or (str(before[0]) if before else self.current)
            changes.graph = changes.status = True
            self._enter_phase("paused", changes)

    def _enter_phase(self, phase: str, changes: Changes) -> None:
        """A new phase of the run redraws the tasks whose shown status it moves (a task in
        flight waits while its run waits, and is cancelled once it stopped)."""
        if phase != self.phase and self.tasks:
            before = {tid: self.shown_status(str(t.get("status") or ""))
                      for tid, t in self.tasks.items()}
            self.phase = phase
            changes.tasks |= {tid for tid, t in self.tasks.items()
                              if self.shown_status(str(t.get("status") or "")) != before[tid]}
        self.phase = phase

    def shown_status(self, status: str) -> str:
        """A task's status as the run's phase makes it true: a task in flight waits while
        its run waits for an operator, and stops (cancelled) when its run stopped."""
        view = self.task_view
        if view is None:
            return status
        in_flight = status == view.running or status in view.not_started
        if self.phase == "stopped" and in_flight:
            return CANCELLED
        if self.phase in ("waiting", "paused") and status == view.running:
            return WAITING
        return status

    def _enter(self, node: str, step: int | None) -> None:
        if step != self._step:
            self._prev_nodes, self._step_nodes, self._step = self._step_nodes, set(), step
        self._step_nodes.add(node)
        self.current = node
        self.taken.update((p, node) for p in self._prev_nodes if (p, node) in self.edges)

    def _absorb(self, update: dict[str, Any], changes: Changes) -> None:
        view = self.task_view
        if view is not None and isinstance(update.get(view.channel), dict):
            patch = update[view.channel]
            before = set(self.tasks)
            self.tasks = view.merge(self.tasks, patch)  # the graph's own reducer
            changed = {str(tid) for tid in patch}
            changes.tasks |= changed
            added = changed - before
            changes.added |= added
            changes.plans |= {str(self.tasks[t]["parent"]) for t in added
                              if t in self.tasks and self.tasks[t].get("parent") is not None}
            shown = sum(1 for t in self.tasks.values() if t.get("parent") is not None)
            if (shown - len(added) > COMPACT_FROM) != (shown > COMPACT_FROM):
                changes.new_tasks = True  # the DAG turns compact: drawn again as a whole
        decisions = update.get(self.decisions_channel) if self.decisions_channel else None
        if isinstance(decisions, list) and decisions:
            self.decisions.extend(d for d in decisions if isinstance(d, dict))
            changes.decisions = True


def trace_fold(*, run: Run, upto: int | None = None) -> tuple[TraceFold, list[dict[str, Any]]]:
    """Fold a run's log (up to seq ``upto``); return the fold and the events as dicts."""
    fold = _new_fold(run)
    events = selectors.run_events(run_id=run.id)
    if upto is not None:
        events = events.filter(seq__lte=upto)
    rows = [event_dict(e) for e in events]
    fold.apply(rows)
    return fold, rows


@dataclass(frozen=True)
class ReplayPoint:
    """A replay at one event: the log folded so far, and where stepping by node goes."""

    fold: TraceFold
    events: list[dict[str, Any]]
    """The events up to the chosen one."""
    stops: list[int]
    """Where each node execution of the whole log ends (see ``Row.stops``)."""
    at: int
    last: int
    """The log's last seq."""

    @property
    def next_node(self) -> int:
        """The next stop after ``at`` (the last event when there is none)."""
        return min((s for s in self.stops if s > self.at), default=self.last)

    @property
    def prev_node(self) -> int:
        """The stop before ``at`` (the first event when there is none)."""
        return max((s for s in self.stops if s < self.at), default=1)

    @property
    def node_number(self) -> int:
        """How many stops lie at or before ``at``."""
        return sum(1 for s in self.stops if s <= self.at)


def replay_point(*, run: Run, upto: int) -> ReplayPoint:
    """The run's log folded up to ``upto``, with the stops of the whole log (one read)."""
    fold = _new_fold(run)
    rows = [event_dict(e) for e in selectors.run_events(run_id=run.id)]
    shown = [r for r in rows if r["seq"] <= upto]
    fold.apply(shown)
    return ReplayPoint(fold=fold, events=shown, stops=replay_stops(timeline_rows(rows)),
                       at=upto, last=rows[-1]["seq"] if rows else upto)


def state_at(*, run: Run, events: list[dict[str, Any]]) -> dict[str, Any]:
    """The state at the last root checkpoint among ``events``, as the inspector shows it."""
    event = next((e for e in reversed(events)
                  if e["kind"] == Kind.CHECKPOINT and not e["namespace"]), None)
    view = checkpoint_get(thread_id=run.thread_id, checkpoint_id=event["checkpoint_id"]) \
        if event and event["checkpoint_id"] else None
    return {"event": event, "checkpoint": view,
            "values_json": pretty(view.values) if view else ""}


def _new_fold(run: Run) -> TraceFold:
    """An empty fold for ``run``'s graph (its edges, task view and decisions channel)."""
    topology = graph_topology_or_none(run.graph)
    spec = graph_spec_or_none(run.graph)
    fold = TraceFold(edges=frozenset((s, t) for s, t, _ in topology.edges) if topology
                     else frozenset(),
                     task_view=spec.task_view if spec else None,
                     decisions_channel=spec.decisions_channel if spec else "",
                     waterfall=WaterfallFold(
                         tool_nodes=frozenset(spec.tool_nodes) if spec else frozenset(),
                         task_view=spec.task_view if spec else None))
    if spec is not None and spec.task_view is not None:
        fold.timeline.task_channel = spec.task_view.channel
        fold.timeline.task_failed = spec.task_view.failed
    if spec is not None:
        fold.timeline.goal_failure = spec.goal_failure
        fold.timeline.failure_label = spec.failure_label
    return fold


def graph_spec_or_none(graph: str) -> GraphSpec | None:
    """The graph's registry entry, or None when it is no longer registered."""
    try:
        return get_graph(graph)
    except KeyError:
        return None


def graph_topology_or_none(graph: str) -> Topology | None:
    """The graph's topology, or None when the graph is no longer registered."""
    try:
        return graph_topology(graph)
    except KeyError:
        return None


@dataclass(frozen=True)
class TaskGroup:
    """One plan: the subtasks of ``parent`` laid out in columns by dependency level."""

    parent: str
    parent_goal: str
    depth: int
    columns: list[list[dict[str, Any]]]

    @property
    def dom(self) -> str:
        """The plan's id as an HTML id."""
        return dom_id(self.parent)


def task_groups(fold: TraceFold) -> list[TaskGroup]:
    """The task DAG as plans (root first, nested plans after their parent), by level."""
    tasks = fold.tasks
    children: dict[str, list[str]] = {}
    for tid, task in tasks.items():
        if task.get("parent") is not None:
            children.setdefault(str(task["parent"]), []).append(tid)
    groups: list[TaskGroup] = []
    order = [tid for tid, t in tasks.items() if t.get("parent") is None]
    seen: set[str] = set()
    while order:
        parent = order.pop(0)
        if parent in seen or parent not in children:
            continue
        seen.add(parent)
        kids = children[parent]
        groups.append(TaskGroup(
            parent=parent, parent_goal=str(tasks.get(parent, {}).get("goal") or ""),
            depth=int(tasks.get(parent, {}).get("depth") or 0),
            columns=_levels(kids, fold),
        ))
        order.extend(kids)
    return groups


def _levels(ids: list[str], fold: TraceFold) -> list[list[dict[str, Any]]]:
    """Longest-path levels of sibling tasks (dependencies outside the plan are ignored)."""
    tasks = fold.tasks
    local = set(ids)
    level: dict[str, int] = {}

    def depth_of(tid: str, trail: frozenset[str] = frozenset()) -> int:
        if tid in level:
            return level[tid]
        deps = [d for d in tasks[tid].get("deps") or () if d in local and d not in trail]
        level[tid] = 1 + max((depth_of(d, trail | {tid}) for d in deps), default=-1)
        return level[tid]

    columns: list[list[dict[str, Any]]] = []
    for tid in ids:
        n = depth_of(tid)
        while len(columns) <= n:
            columns.append([])
        columns[n].append(task_card(fold, tid))
    return columns


def event_detail(*, run_id: UUID | str, seq: int) -> dict[str, Any]:
    """One event with the checkpoint it led to and that checkpoint's parent (for a diff)."""
    event = selectors.run_events(run_id=run_id).get(seq=seq)
    after: RunEvent | None
    if event.kind == Kind.CHECKPOINT:
        after = event
    else:
        after = (
            selectors.run_events(run_id=run_id, after=seq)
            .filter(kind=Kind.CHECKPOINT, namespace=event.namespace).first()
        )
    return {"event": event, "checkpoint": after}


def graph_label(fold: TraceFold) -> str:
    """The picture said in words (its accessible name): where the run stands, what it visited."""
    where = f"current node {fold.current}" if fold.current else "no node running"
    visited = ", ".join(f"{n} {c} time{'s' if c > 1 else ''}"
                        for n, c in fold.visits.items() if n not in (START, END))
    return f"Graph of this run: {where}; visited {visited or 'nothing yet'}"


def graph_outline(fold: TraceFold, topology: Topology | None) -> list[dict[str, Any]]:
    """The graph as a list for pages without JavaScript: each node, its visits, its exits."""
    if topology is None:
        return []
    said = {START: "start", END: "end"}
    exits: dict[str, list[str]] = {}
    for source, target, _ in topology.edges:
        exits.setdefault(source, []).append(said.get(target, target))
    return [{"node": said.get(n, n), "visits": fold.visits.get(n, 0),
             "current": n == fold.current, "failed": n in fold.failed,
             "exits": exits.get(n, [])}
            for n in topology.nodes if n != END]


def graph_state(fold: TraceFold) -> dict[str, Any]:
    """The picture's live marks keyed by Mermaid-safe node ids (visits, current, edges)."""
    return {
        "label": graph_label(fold),
        "current": dom_id(fold.current) if fold.current else "",
        "visits": {dom_id(n): c for n, c in fold.visits.items()},
        "failed": sorted(dom_id(n) for n in fold.failed),
        "taken": sorted([dom_id(s), dom_id(t)] for s, t in fold.taken),
    }


def panels_context(*, run: Run, fold: TraceFold) -> dict[str, Any]:
    """Everything the trace panels render from, shared by the page, socket and replay."""
    topology = graph_topology_or_none(run.graph)
    state = graph_state(fold)
    return {
        "run": run,
        "fold": fold,
        "topology": topology,
        "graph_state": state,
        "graph_state_json": json.dumps(state),
        # drawn when the template asks (the page's <noscript>, never a socket batch)
        "graph_outline": functools.partial(graph_outline, fold, topology),
        "show_dag": fold.task_view is not None,
        "dag_leads": fold.task_view is not None and fold.task_view.leads,
        "show_why": bool(fold.decisions_channel),
        # drawn only when tasks were added: the template calls it then, not on every batch
        "task_groups": functools.partial(task_groups, fold),
        "task_count": sum(1 for t in fold.tasks.values() if t.get("parent") is not None),
        "dag_compact": sum(1 for t in fold.tasks.values() if t.get("parent") is not None)
        > COMPACT_FROM,
        "task_statuses": (*fold.task_view.statuses, WAITING, CANCELLED) if fold.task_view
        else (),
        "decisions": fold.decisions,
        # laid out when the template asks (the page, and each batch that moved it)
        "waterfall": functools.partial(run_waterfall, run, fold),
        "last_seq": fold.last_seq,
        "duration": run_duration(run),
    }


def run_waterfall(run: Run, fold: TraceFold) -> Any:
    """The run's waterfall as folded so far; an active run's open bars reach to now."""
    origin = fold.waterfall.origin
    now = (timezone.now() - origin).total_seconds() if origin and not run.is_finished else None
    return waterfall_view(fold.waterfall, run_id=run.id, now=now, tasks=fold.tasks,
                          shown=fold.shown_status)


def run_duration(run: Run) -> str:
    """How long the run has run (until now while it is active), as ``12.3 s``."""
    if run.started_at is None:
        return "—"
    end = run.finished_at or timezone.now()
    return f"{(end - run.started_at).total_seconds():.1f} s"


def pretty(value: Any) -> str:
    """JSON for people: indented, non-ASCII kept, anything odd shown as text."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=False)


def task_card(fold: TraceFold, tid: str) -> dict[str, Any]:
    """One task as the DAG's card template renders it (its status as the run makes it)."""
    task = fold.tasks[tid]
    status = str(task.get("status") or "")
    return {**task, "id": tid, "dom": dom_id(tid), "status": fold.shown_status(status),
            "recorded_status": status}
