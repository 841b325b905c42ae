"""A run's outcome: decided once, when it stops, beside its execution status.

A graph that returned may still have failed its goal (a decomposition's failed plan, as its
``GraphSpec.failed_when`` says); a run cancelled by a budget was not cancelled by anyone.
:func:`outcome_decide` names the outcome and its reason from what the run's end knows (its
final state, its graph's spec, its output or error, the payload of its closing event); the
run store's one finish transition (``dashboard.runs.store.finish``) calls it and stores both
on the run (``Run.outcome``, ``Run.outcome_reason``). Every page, the API, the export, the
spans, ``/metrics`` and the LangGraph API read that stored value; what each outcome means to
each of them is :data:`MEANINGS`, here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import models

from dashboard.runs.states import State, Status, ThreadStatus
from planner.chat import ending_text
from planner.registry import get_graph
from planner.spec import GraphSpec


class Outcome(models.TextChoices):
    """How a finished run ended, as people read it (``Run.outcome``; null while unfinished)."""

    SUCCEEDED = "succeeded", "Succeeded"  # its graph returned and its goal was met
    # its graph returned, but its output says the goal failed (GraphSpec.failed_when)
    PLAN_FAILED = "plan_failed", "Plan failed"
    FAILED = "failed", "Failed"  # a node raised, or the executor gave up
    CANCELLED = "cancelled", "Cancelled"  # stopped by an operator (or a question's deadline)
    # stopped by one of its budgets (tokens, cost, model calls…), through the cancel path
    BUDGET_EXCEEDED = "budget_exceeded", "Budget exceeded"


@dataclass(frozen=True)
class Meaning:
    """What an outcome says, to each reader of it."""

    state: State
    """The final state a run with this outcome is in (its execution status's)."""
    shown: Status
    """The status the pages file it under (their "Status" filter): a failed plan is failed."""
    failure: bool
    """Its goal was not met: the spans' root is an error, its thread's status ``error``."""
    thread: ThreadStatus
    """The status its LangGraph thread takes while it is the thread's latest run."""


MEANINGS: dict[Outcome, Meaning] = {
    Outcome.SUCCEEDED: Meaning(State.SUCCEEDED, Status.SUCCEEDED, False, ThreadStatus.IDLE),
    Outcome.PLAN_FAILED: Meaning(State.SUCCEEDED, Status.FAILED, True, ThreadStatus.ERROR),
    Outcome.FAILED: Meaning(State.FAILED, Status.FAILED, True, ThreadStatus.ERROR),
    Outcome.CANCELLED: Meaning(State.CANCELLED, Status.CANCELLED, False, ThreadStatus.IDLE),
    Outcome.BUDGET_EXCEEDED: Meaning(State.CANCELLED, Status.FAILED, True, ThreadStatus.ERROR),
}

FAILURES = tuple(o for o, m in MEANINGS.items() if m.failure)
"""The outcomes whose goal was not met."""


def meaning(outcome: str) -> Meaning:
    """What ``outcome`` (an :class:`Outcome` value) says."""
    return MEANINGS[Outcome(outcome)]


def shown_as(status: str) -> tuple[Outcome, ...]:
    """The outcomes the pages file under ``status`` (none for an unfinished status)."""
    return tuple(o for o, m in MEANINGS.items() if m.shown == status)


def budget_reason(budget: Mapping[str, Any]) -> str:
    """The reason of a run a budget stopped, naming the figure: ``tokens budget exceeded:
    12,400 used of 10,000``."""
    kind = str(budget.get("kind") or "a")
    used, limit = budget.get("used"), budget.get("limit")

    def figure(value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return str(value)
        return f"{value:,}" if isinstance(value, int) else (
            f"{value:,.4f}".rstrip("0").rstrip("."))

    return f"{kind} budget exceeded: {figure(used)} used of {figure(limit)}"


def outcome_decide(*, state: str, spec: GraphSpec | None, output: Any = None,
                   error: str = "", closing: Mapping[str, Any] | None = None
                   ) -> tuple[Outcome, str]:
    """The outcome of a run that ends in final ``state`` and why: its graph's ``spec`` (None
    if no longer registered) reads its ``output``; ``error`` is a failed run's message;
    ``closing`` the payload of the event that closes its log (a cancel's ``by`` and
    ``reason``, or the ``budget`` that stopped it)."""
    closing = closing or {}
    if state == State.SUCCEEDED:
        failed = spec.goal_failure(output) if spec is not None else None
        if failed is None:
            return Outcome.SUCCEEDED, ""
        return Outcome.PLAN_FAILED, failed or spec.failure_label  # type: ignore[union-attr]
    if state == State.FAILED:
        return Outcome.FAILED, error or "the run failed"
    if state != State.CANCELLED:
        raise ValueError(f"{state!r} is not a final state; an outcome is decided for "
                         f"{', '.join(m.state for m in MEANINGS.values())} only")
    budget = closing.get("budget")
    if isinstance(budget, Mapping):
        return Outcome.BUDGET_EXCEEDED, budget_reason(budget)
    who = closing.get("by") or ""
    why = closing.get("reason") or ""
    said = f"cancelled by {who}" if who else "cancelled"
    return Outcome.CANCELLED, f"{said}: {why}" if why and why != "cancelled" else said


@dataclass(frozen=True)
class Told:
    """A finished run's outcome where its status alone would mislead (a failed plan, a
    budget that stopped it), as the pages tell it."""

    outcome: Outcome
    label: str
    """``plan failed`` (the graph's ``failure_label``), ``budget exceeded``."""
    reason: str

    @property
    def headline(self) -> str:
        """The badge's words: ``Finished — plan failed``, ``Stopped — budget exceeded``."""
        verb = "Finished" if meaning(self.outcome).state == State.SUCCEEDED else "Stopped"
        return f"{verb} \u2014 {self.label}"


def told(*, outcome: str | None, reason: str, graph: str) -> Told | None:
    """The outcome of a run of ``graph`` the pages tell beside its status (None: its status
    says it all, or it has not ended)."""
    if not outcome or outcome not in (Outcome.PLAN_FAILED, Outcome.BUDGET_EXCEEDED):
        return None
    if outcome == Outcome.BUDGET_EXCEEDED:
        return Told(Outcome.BUDGET_EXCEEDED, "budget exceeded", reason)
    try:
        label = get_graph(graph).failure_label
    except KeyError:  # a graph no longer registered
        label = "goal failed"
    return Told(Outcome.PLAN_FAILED, label, reason)


ENDED_BY = {Outcome.FAILED: "The run failed",
            Outcome.BUDGET_EXCEEDED: "The run was stopped by its budget"}
"""What a chat's last message says first of a run that ended where no node of its graph
was left to say so (a failed plan's graph says it itself, in its last message)."""
MESSAGE_REASON_CHARS = 500
"""A failed run's error may be long (a model provider's answer): the chat gets its start."""


def outcome_message(*, outcome: str | None, reason: str) -> str:
    """The chat's last message for a run that failed or that a budget stopped (``The run
    was stopped by its budget: tokens budget exceeded: 12,400 used of 10,000.``), as
    :func:`planner.chat.ending_text` words a failed plan's; "" for another outcome (its
    graph's own last message says how it ended: a result, a failed plan and why)."""
    said = ENDED_BY.get(Outcome(outcome)) if outcome in Outcome.values else None
    if said is None:
        return ""
    if len(reason) > MESSAGE_REASON_CHARS:
        reason = reason[:MESSAGE_REASON_CHARS].rstrip() + "\u2026"
    return ending_text(said, reason)
