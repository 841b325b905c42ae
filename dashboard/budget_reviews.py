"""A run paused at its budget, as LangGraph's clients see and answer it.

While a run waits at its budget (``on_limit: "pause"``, :mod:`dashboard.runs.budgets`),
its thread shows one interrupt that Planwatch adds where the thread's state is read
(:func:`budget_interrupt`); it is Planwatch's own pause, never written into LangGraph's
checkpoint, so a fork or a replay of that checkpoint knows nothing of it. Its value is
offered in Agent Inbox's ``HumanInterrupt`` shape (``action_request``, ``config``,
``description``) and in Agent Chat UI's (``action_requests``, ``review_configs``), as the
planners' questions are (:func:`planner.questions.review_request`): one action,
``budget``, whose editable argument ``extend_by`` is the amount to add.

A resume of it (:func:`answer_of`) is one of: an extension (Agent Inbox's accept, edit or
a numeric response; the newer approve or edit; ``{"extend": {...}}`` as the REST API
takes it; a bare amount) or a stop (ignore, reject, a response ``"stop"``, ``"stop"``,
``{"stop": true}``). What it does is the services' ``run_budget_extend`` or
``run_budget_stop``, as on the run page and the REST API.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dashboard.runs.budgets import (
    LABELS,
    LIMITS,
    BudgetInvalid,
    BudgetPause,
    budget_parse,
    extend_text,
    shown,
)
from dashboard.services import BudgetError, RunStateError

PREFIX = "planwatch-budget-"
"""How the id of a budget pause's interrupt begins (then the run's id and the pause's seq)."""
ACTION = "budget"
"""The name of the one action a budget pause offers."""
STOP_WORDS = ("stop",)
"""What a typed response says to stop the run."""


def interrupt_id(run_id: Any, pause: BudgetPause) -> str:
    """The id of the interrupt of ``run_id``'s budget pause (one pause apart from the
    next: an old pause's id answers nothing)."""
    return f"{PREFIX}{run_id}-{pause.seq}"


def suggested(reached: Mapping[str, Any]) -> float:
    """The extension offered as it stands: as much again as the limit (at least 1 for a
    count), so accepting it doubles the budget."""
    key = str(reached.get("kind"))
    limit = float(reached.get("limit") or 0)
    if key in LIMITS and LIMITS[key][0] is int:
        return max(1, int(limit))
    return limit if limit > 0 else 1.0


def description(reached: Mapping[str, Any]) -> str:
    """The question in words: ``Cost budget of $0.50 reached ($0.52 used): extend by …,
    or stop``."""
    said = extend_text(reached)
    key = str(reached.get("kind"))
    by = shown(key, suggested(reached)) if key in LABELS else str(suggested(reached))
    return (f"{said[:1].upper()}{said[1:]}: extend by {by} (accept), by another amount "
            "(edit extend_by, or respond with a number), or stop the run (ignore, or "
            'respond "stop").')


def budget_interrupt(run_id: Any, pause: BudgetPause) -> dict[str, Any]:
    """The interrupt a thread shows while its run waits at ``pause`` (``{"id",
    "value"}``, as LangGraph's server shapes an interrupt)."""
    reached = pause.reached
    key = str(reached.get("kind"))
    args = {"budget": key, "limit": reached.get("limit"), "used": reached.get("used"),
            "extend_by": suggested(reached)}
    text = description(reached)
    label = LABELS[key][0].lower() if key in LABELS else key
    by: dict[str, Any] = {"type": "number", "exclusiveMinimum": 0,
                          "title": f"Extend the {label} budget by"}
    return {"id": interrupt_id(run_id, pause), "value": {
        "action_request": {"action": ACTION, "args": args},
        "config": {"allow_ignore": True, "allow_respond": True, "allow_edit": True,
                   "allow_accept": True},
        "description": text,
        "action_requests": [{"name": ACTION, "args": args, "arguments": args,
                             "description": text}],
        "review_configs": [{"action_name": ACTION,
                            "allowed_decisions": ["approve", "edit", "reject"],
                            "args_schema": {"type": "object",
                                            "properties": {"extend_by": by},
                                            "required": ["extend_by"]}}],
        "budget": dict(reached),
    }}


@dataclass(frozen=True)
class BudgetAnswer:
    """What a resume of a budget pause asks: the limits to add (``run_budget_extend``'s
    ``extend``), or ``None``: stop the run."""

    extend: dict[str, Any] | None = None

    @property
    def stops(self) -> bool:
        """The run is to end at its budget."""
        return self.extend is None


STOP = BudgetAnswer()
REVIEW_TYPES = ("accept", "approve", "edit", "response", "ignore", "reject")


def answer_of(resume: Any, *, run_id: Any, pause: BudgetPause) -> BudgetAnswer:
    """What ``resume`` (a run request's ``command.resume``) asks of the budget pause
    ``pause`` of run ``run_id``, its extension checked by the one budget parser;
    ``BudgetError`` (422) says what to send instead, ``RunStateError`` (409) names the open
    pause when ``resume`` answers another."""
    answer = _answer(resume, run_id=run_id, pause=pause)
    if answer.extend is not None:
        try:
            budget_parse(answer.extend, field="command.resume.extend")
        except BudgetInvalid as exc:
            raise BudgetError(str(exc), errors={exc.field: exc.message}) from None
    return answer


def _answer(resume: Any, *, run_id: Any, pause: BudgetPause) -> BudgetAnswer:
    wanted = interrupt_id(run_id, pause)
    value = resume
    if isinstance(resume, Mapping) and any(str(k).startswith(PREFIX) for k in resume):
        if set(resume) != {wanted}:
            others = ", ".join(sorted(str(k) for k in resume if k != wanted))
            raise RunStateError(f"interrupt {others} is not open; run {run_id} waits at its "
                                f"budget as interrupt {wanted}: resume that one")
        value = resume[wanted]
    key = str(pause.reached.get("kind"))
    decision = _decision(value)
    if decision is not None:
        return _decided(decision, key=key, pause=pause, value=value, run_id=run_id)
    if _says_stop(value):
        return STOP
    if isinstance(value, Mapping) and value and set(value) <= {"extend", "stop"}:
        if value.get("stop") is True and value.get("extend") is None:
            return STOP
        if isinstance(value.get("extend"), Mapping) and not value.get("stop"):
            return BudgetAnswer(dict(value["extend"]))
    amount = _amount(value)
    if amount is not None:
        return BudgetAnswer({key: amount})
    raise _refused(value, key=key, pause=pause, run_id=run_id)


def _decision(value: Any) -> Mapping[str, Any] | None:
    """The one decision of Agent Inbox's list or Agent Chat UI's ``{"decisions": […]}``."""
    if isinstance(value, Mapping) and isinstance(value.get("decisions"), list):
        value = value["decisions"]
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, Mapping) and value.get("type") in REVIEW_TYPES:
        return value
    return None


def _decided(decision: Mapping[str, Any], *, key: str, pause: BudgetPause, value: Any,
             run_id: Any) -> BudgetAnswer:
    kind, args = decision["type"], decision.get("args")
    if kind in ("ignore", "reject"):
        return STOP
    if kind == "response":
        if _says_stop(args):
            return STOP
        amount = _amount(args)
    elif kind == "edit":
        amount = _amount(_extend_by(decision.get("edited_action") or args))
    else:  # accept / approve: as offered, or as the action sent says
        offered = _extend_by(args)
        amount = suggested(pause.reached) if offered is None else _amount(offered)
    if amount is None:
        raise _refused(value, key=key, pause=pause, run_id=run_id)
    return BudgetAnswer({key: amount})


def _extend_by(action: Any) -> Any:
    """The ``extend_by`` argument of an action request (``{"action", "args"}``, ``{"name",
    "args"}``) or of its arguments themselves; None if it names none."""
    if not isinstance(action, Mapping):
        return None
    args = action.get("args", action.get("arguments", action))
    return args.get("extend_by") if isinstance(args, Mapping) else None


def _says_stop(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() in STOP_WORDS


def _amount(raw: Any) -> float | None:
    """A positive amount to extend by (a number, or text such as ``"0.5"``, ``"$0.50"``,
    ``"1,000"``), or None."""
    if isinstance(raw, str):
        try:
            raw = float(raw.strip().lstrip("$").replace(",", ""))
        except ValueError:
            return None
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    if not math.isfinite(raw) or raw <= 0:
        return None
    return raw


def _refused(value: Any, *, key: str, pause: BudgetPause, run_id: Any) -> BudgetError:
    example = suggested(pause.reached)
    example_text = f"{example:g}"
    said = repr(value)
    said = said if len(said) <= 80 else f"{said[:80]}…"
    return BudgetError(
        f"command.resume: run {run_id} waits at its budget ({extend_text(pause.reached)}); "
        f'to extend it, resume with a positive amount: [{{"type": "response", "args": '
        f'"{example_text}"}}], [{{"type": "edit", "args": {{"action": "{ACTION}", "args": '
        f'{{"extend_by": {example_text}}}}}}}], or {{"extend": {{"{key}": {example_text}}}}}; '
        f'to stop it: [{{"type": "ignore"}}] or "stop"; not {said}',
        errors={"command.resume": "a positive amount to extend the budget by, or stop"})
