"""The acquisition planner's checkpointed state: plain JSON values only.

Everything here is serialised by the checkpointer and stored as JSON by the dashboard, so
no pydantic models or dataclasses live in state. Logs (``decisions``, ``searches``,
``answers``, ``notes``) are append-only through the ``operator.add`` reducer; the chat
transcript (``messages``) is merged by LangGraph's ``add_messages`` and kept as JSON.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypedDict

from planner.chat import ChatMessages, opening_messages

Action = Literal["search", "ask_user", "calculate", "reflect", "finish"]
ACTIONS: tuple[str, ...] = ("search", "ask_user", "calculate", "reflect", "finish")

Origin = Literal["deterministic", "llm", "llm_error"]
ORIGINS: tuple[str, ...] = ("deterministic", "llm", "llm_error")

Status = Literal["running", "aborted", "done"]


class Decision(TypedDict):
    """What to do next: an action on a field, with a query for searches and a reason."""

    action: str
    field: str | None
    query: str | None
    reason: str


class AcquisitionState(TypedDict):
    """The state of one acquisition run (see the module docstring for the rules)."""

    graph_version: int
    goal: str
    profile: str
    max_iters: int
    iterations: int
    """Completed loop entries; only ``tick`` writes it."""
    status: str
    """running | aborted (no way forward: tick finishes) | done (finish ran)."""
    abort_reason: str | None
    values: dict[str, Any]
    """Acquired field values by field name (region, currency, numbers, the TAM)."""
    sources: dict[str, str]
    """Where each value came from: input, user, calculator or a search source."""
    schema: dict[str, dict[str, Any]]
    """The composed schema ``prepare`` writes: per field its strategy and status."""
    dynamic_decompositions: dict[str, list[str]]
    """Derived field -> component fields being acquired for it (activated on demand)."""
    decision: Decision | None
    decision_origin: str | None
    """deterministic | llm | llm_error for the current decision; reset by ``tick``."""
    decided_by: str | None
    """Which node (and rule) made the current raw decision; reset by ``tick``."""
    decisions: Annotated[list[dict[str, Any]], operator.add]
    """Provenance records, one per decision (see ``provenance_record``)."""
    searches: Annotated[list[dict[str, Any]], operator.add]
    """One entry per search: iteration, field, query, hits, error."""
    last_observation: dict[str, Any] | None
    """The hit ``search`` hands to ``observe``; None when the search found nothing."""
    pending_answer: dict[str, Any] | None
    """The raw answer ``ask_user`` hands to ``observe_user``."""
    answers: Annotated[list[dict[str, Any]], operator.add]
    """One entry per answer: iteration, field, answer, valid, reason."""
    calculation: dict[str, Any] | None
    """The calculator's last run: status (success | blocked), target, inputs, missing, value."""
    calc_runs: int
    notes: Annotated[list[dict[str, Any]], operator.add]
    """Observations and reflections worth showing an operator."""
    result: dict[str, Any] | None
    """The run's output, written by ``finish``."""
    messages: ChatMessages
    """The chat transcript: the goal, each question and answer, the result in words."""


def decision(action: str, field: str | None = None, query: str | None = None,
             reason: str = "") -> Decision:
    """Build a decision dict (the one shape every node and rule uses)."""
    return {"action": action, "field": field, "query": query, "reason": reason}


def brief(d: Decision | dict[str, Any] | None) -> dict[str, Any]:
    """The action/field/query part of a decision, as provenance records show it."""
    d = d or {}
    return {"action": d.get("action"), "field": d.get("field"), "query": d.get("query")}


def provenance_record(*, iteration: int, origin: str, decided_by: str, raw: Decision,
                      rules: list[dict[str, Any]], final: Decision) -> dict[str, Any]:
    """One entry of ``decisions``: the raw decision, the rules that rewrote it, the result."""
    return {
        "iteration": iteration,
        "origin": origin,
        "decided_by": decided_by,
        "raw": {**brief(raw), "reason": raw.get("reason", "")},
        "rules": rules,
        "final": brief(final),
    }


def initial_state(*, goal: str, profile: str, max_iters: int, version: int,
                  values: dict[str, Any] | None = None,
                  messages: list[dict[str, Any]] | None = None) -> AcquisitionState:
    """A fresh state with every key present (pre-filled ``values`` come from the input,
    the transcript's opening ``messages`` too: the goal as a human message by default)."""
    values = dict(values or {})
    return {
        "graph_version": version,
        "goal": goal,
        "profile": profile,
        "max_iters": max_iters,
        "iterations": 0,
        "status": "running",
        "abort_reason": None,
        "values": values,
        "sources": {name: "input" for name in values},
        "schema": {},
        "dynamic_decompositions": {},
        "decision": None,
        "decision_origin": None,
        "decided_by": None,
        "decisions": [],
        "searches": [],
        "last_observation": None,
        "pending_answer": None,
        "answers": [],
        "calculation": None,
        "calc_runs": 0,
        "notes": [],
        "result": None,
        "messages": list(messages) if messages is not None else opening_messages(None, goal),
    }


def sources_after_edit(state: Mapping[str, Any], edit: Mapping[str, Any]) -> dict[str, Any]:
    """An operator's edit of acquired values: each changed value's source becomes
    ``edited`` (unless the edit sets the sources itself), so no card calls it answered."""
    values = edit.get("values")
    if "sources" in edit or not isinstance(values, Mapping):
        return {}
    before = state.get("values") or {}
    changed = [name for name, value in values.items()
               if name not in before or before[name] != value]
    if not changed:
        return {}
    return {"sources": {**(state.get("sources") or {}), **dict.fromkeys(changed, "edited")}}
