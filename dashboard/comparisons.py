"""Reads: runs of a branch tree side by side (the compare page and ``/api/runs/compare/``).

Each run becomes a :class:`CompareColumn`: its outcome, its result's headline, the models
its calls really used, its first decision that differs from the reference run's (the
first column), and its figures (model calls, tokens, cost, working and wall time) from
:func:`dashboard.selectors.run_figures`, as every page shows them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from dashboard.checkpoints import run_checkpoint
from dashboard.models import Run, RunEvent
from dashboard.runs.figures import Figures
from dashboard.selectors import run_figures
from planner.presentation import generic_result_card
from planner.registry import get_graph

TREE_LIMIT = 12
"""The most runs of a branch tree compared at once."""


@dataclass(frozen=True)
class CompareColumn:
    """One run of a comparison."""

    run: Run
    reference: bool
    outcome: str
    result: str
    models: list[str]
    decisions: int
    divergence: int | None
    divergent_decision: Any
    reference_decision: Any
    figures: Figures
    total_tokens: int | None
    active: bool


def run_outcome_word(run: Run) -> str:
    """A finished run's stored outcome (``succeeded``, ``plan_failed``, ``failed``,
    ``cancelled``, ``budget_exceeded``: decided once when it stopped), or its status while
    it has not ended (the one place the compare page and /api/ read it)."""
    return str(run.outcome or run.status)


def result_headline(run: Run) -> str:
    """The headline of a run's result, or why it has none."""
    if run.status == Run.Status.SUCCEEDED:
        try:
            spec = get_graph(run.graph)
            found = run.told
            if found is not None:
                return f"{found.label}: {found.reason}" if found.reason else found.label
            return spec.present_result(run.output).headline
        except Exception:  # an old output, a graph no longer served: shown as it is
            return generic_result_card(run.output).headline
    if run.status == Run.Status.FAILED:
        return f"Failed: {run.error_message[:200]}" if run.error_message else "Failed"
    if run.status == Run.Status.CANCELLED:
        return "Cancelled"
    return f"No result yet ({run.get_status_display().lower()})"


def decisions_of(run: Run) -> list[Any]:
    """The run's decisions in order: its graph's decisions channel in its newest
    checkpoint, or (a graph that declares none) the root nodes it ran, a fork's after
    those its parent ran before the fork's checkpoint."""
    try:
        channel = get_graph(run.graph).decisions_channel
    except KeyError:
        channel = ""
    if channel:
        view = run_checkpoint(run)
        found = (view.values or {}).get(channel) if view is not None else None
        return list(found) if isinstance(found, list) else []
    return _nodes_run(run.id, upto=None, depth=0)


def _nodes_run(run_id: Any, *, upto: int | None, depth: int) -> list[str]:
    """The root nodes run ``run_id`` finished (before seq ``upto``), after those of the
    runs it was forked from (``TREE_LIMIT`` generations at most)."""
    run = Run.objects.filter(id=run_id).values("parent_id", "forked_from_checkpoint").first()
    if run is None:
        return []
    inherited: list[str] = []
    if run["parent_id"] and run["forked_from_checkpoint"] and depth < TREE_LIMIT:
        at = (RunEvent.objects.filter(run_id=run["parent_id"], kind=RunEvent.Kind.CHECKPOINT,
                                      namespace="",
                                      checkpoint_id=run["forked_from_checkpoint"])
              .values_list("seq", flat=True).first())
        if at is not None:
            inherited = _nodes_run(run["parent_id"], upto=at, depth=depth + 1)
    own = RunEvent.objects.filter(run_id=run_id, kind=RunEvent.Kind.NODE_FINISHED,
                                  namespace="")
    if upto is not None:
        own = own.filter(seq__lt=upto)
    return inherited + list(own.order_by("seq").values_list("node", flat=True))


def first_divergence(reference: list[Any], other: list[Any]) -> int | None:
    """The index of ``other``'s first decision unlike ``reference``'s (one run making
    more decisions than the other differs at the shorter's end); None when alike."""
    for index, (mine, theirs) in enumerate(zip(reference, other, strict=False)):
        if mine != theirs:
            return index
    return None if len(reference) == len(other) else min(len(reference), len(other))


def models_used(run_ids: Iterable[Any]) -> dict[str, list[str]]:
    """The models each run's finished calls name (as the model reported them), in order."""
    rows = (RunEvent.objects.filter(run_id__in=list(run_ids),
                                    kind=RunEvent.Kind.MODEL_FINISHED)
            .order_by("run_id", "seq").values_list("run_id", "payload"))
    found: dict[str, dict[str, None]] = {}
    for run_id, payload in rows:
        model = payload.get("model") if isinstance(payload, dict) else None
        if model:
            found.setdefault(str(run_id), {})[str(model)] = None
    return {run_id: list(models) for run_id, models in found.items()}


def runs_compare(*, runs: list[Run], now: datetime | None = None) -> list[CompareColumn]:
    """``runs`` side by side, the first the reference the others' decisions are compared
    with."""
    moment = now or timezone.now()
    models = models_used(r.id for r in runs)
    decided = [decisions_of(r) for r in runs]
    columns = []
    for index, (run, decisions) in enumerate(zip(runs, decided, strict=True)):
        at = None if index == 0 else first_divergence(decided[0], decisions)
        columns.append(CompareColumn(
            run=run, reference=index == 0, outcome=run_outcome_word(run),
            result=result_headline(run), models=models.get(str(run.id), []),
            decisions=len(decisions), divergence=at,
            divergent_decision=decisions[at] if at is not None and at < len(decisions)
            else None,
            reference_decision=decided[0][at] if at is not None and at < len(decided[0])
            else None,
            figures=run_figures(run_id=run.id, now=moment), total_tokens=run.total_tokens,
            active=not run.is_finished))
    return columns


def run_tree(*, run: Run, limit: int = TREE_LIMIT) -> list[Run]:
    """The runs of ``run``'s branch tree, oldest first: its root (following parents up)
    and the forks under it, at most ``limit``."""
    root, seen = run, {run.id}
    while root.parent_id is not None and root.parent_id not in seen:
        parent = Run.objects.filter(id=root.parent_id).first()
        if parent is None:
            break
        seen.add(parent.id)
        root = parent
    tree, frontier = [root], [root.id]
    while frontier and len(tree) < limit:
        children = list(Run.objects.filter(Q(parent_id__in=frontier))
                        .exclude(id__in=[r.id for r in tree]).order_by("created_at")
                        [: limit - len(tree)])
        tree.extend(children)
        frontier = [c.id for c in children]
    return tree
