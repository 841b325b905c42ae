"""Reads: what pages, consumers and the API show. No writes here."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from dashboard.models import Interrupt, Run, RunEvent
from dashboard.runs import debugging
from planner.llm import make_llm
from planner.registry import get_graph
from planner.search import default_search

User = AbstractBaseUser | AnonymousUser


def run_list(*, graph: str = "", status: str = "", created_by: str = "") -> QuerySet[Run]:
    """Runs, newest first, optionally filtered by graph, status and creator's username."""
    runs = Run.objects.select_related("created_by").order_by("-created_at", "-id")
    if graph:
        runs = runs.filter(graph=graph)
    if status:
        runs = runs.filter(status=status)
    if created_by:
        runs = runs.filter(created_by__username=created_by)
    return runs


def run_get(*, run_id: UUID | str) -> Run:
    """One run (raises ``Run.DoesNotExist``)."""
    return Run.objects.select_related("created_by").get(id=run_id)


def run_cursor(*, run_id: UUID | str) -> tuple[int, str] | None:
    """A run's last seq and status (one indexed row), or None if it was deleted."""
    return Run.objects.filter(id=run_id).values_list("last_seq", "status").first()


def run_can_view(*, user: User, run: Run) -> bool:
    """Every signed-in user may view every run (runs are a shared operations board)."""
    return bool(user.is_authenticated and user.is_active)


def run_events(*, run_id: UUID | str, after: int = 0, limit: int | None = None
               ) -> QuerySet[RunEvent]:
    """A run's events after ``seq`` ``after``, in seq order."""
    events = RunEvent.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")
    return events[:limit] if limit else events


def interrupts_pending(*, run_id: UUID | str | None = None, graph: str = ""
                       ) -> QuerySet[Interrupt]:
    """Pending interrupts across runs (or of one run), oldest first."""
    qs = Interrupt.objects.filter(status=Interrupt.Status.PENDING).select_related("run")
    if run_id:
        qs = qs.filter(run_id=run_id)
    if graph:
        qs = qs.filter(run__graph=graph)
    return qs.order_by("created_at", "id")


def interrupts_of_run(*, run_id: UUID | str) -> QuerySet[Interrupt]:
    """Every interrupt of one run (pending, answered, withdrawn), oldest first."""
    return (Interrupt.objects.filter(run_id=run_id).select_related("run", "answered_by")
            .order_by("created_at", "id"))


def interrupts_pending_count() -> int:
    """How many interrupts wait for an answer (the navigation badge)."""
    return Interrupt.objects.filter(status=Interrupt.Status.PENDING).count()


@dataclass(frozen=True)
class DebugSchema:
    """What debugging a graph's runs offers: its nodes and its typed state channels."""

    nodes: list[str]
    channels: dict[str, Any]
    internal: tuple[str, ...] = ()
    """The channels the graph declares as its bookkeeping (``GraphSpec.internal_channels``)."""


@functools.cache
def graph_debug_schema(*, graph: str) -> DebugSchema:
    """The nodes breakpoints can name and the channels a fork can edit (raises KeyError)."""
    spec = get_graph(graph)
    builder = spec.build(llm=make_llm("scripted", think_time=0), search=default_search())
    return DebugSchema(nodes=sorted(builder.nodes), channels=debugging.state_channels(builder),
                       internal=spec.internal_channels)


@dataclass(frozen=True)
class Lineage:
    """A run's branches: where it came from, its siblings and its own forks."""

    parent: Run | None
    siblings: list[Run]
    children: list[Run]


def run_lineage(*, run: Run) -> Lineage:
    """The runs forked from the same parent as ``run``, and those forked from ``run``."""
    parent = (Run.objects.select_related("created_by").filter(id=run.parent_id).first()
              if run.parent_id else None)
    siblings = list(Run.objects.filter(parent_id=run.parent_id).exclude(id=run.id)
                    .order_by("created_at")) if parent else []
    children = list(run.forks.select_related("created_by").order_by("created_at"))
    return Lineage(parent=parent, siblings=siblings, children=children)
