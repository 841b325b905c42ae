"""Budgets: how much a run may spend (tokens, cost, model calls, minutes), and the meter
that holds it to them.

A :class:`Budget` is parsed and validated by one function, :func:`budget_parse`, wherever
one comes from: the server's default (``PLANWATCH["BUDGET"]``), the graph's declaration
(``GraphSpec.budget``, or a ``langgraph.json`` entry's ``"budget"``), an assistant's
``config.configurable.budget``, and the run request (``/api/``'s ``budget``, a LangGraph
run's ``config.configurable.budget`` or ``context.budget``, the new-run form).
:func:`budget_resolve` lays them over each other field by field, later layers narrowing
or widening (``null`` lifts a limit); the result is stored on the run (``Run.budget``).

The executor holds a run to its budget with a :class:`BudgetMeter`: seeded at each claim
from what the run spent so far, told of every model call by a :class:`BudgetGuard` (a
LangChain callback handler on the run's config, beside the model-call recorder), and
asked at every node boundary. A call that would cross a budget (the calls' number, or its
``max_tokens`` on top of the tokens spent) is stopped before it is sent; a budget found
reached after a call (its tokens or cost) or by the clock stops the run at the next node
boundary. What happens then is the budget's ``on_limit``: ``pause`` (the run waits, as at
a breakpoint, for an operator to extend the budget or stop it) or ``stop`` (it ends
cancelled, its final event's payload naming the budget: ``{"budget": {"kind", "limit",
"used"}}``). A warning is recorded once per budget when its use reaches ``warn_at``
(80 % by default).
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from django.utils import timezone
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.outputs import LLMResult
from langgraph.errors import GraphBubbleUp

from dashboard.models import Run, RunEvent
from dashboard.runs import instruments
from dashboard.runs.figures import figures_of
from dashboard.runs.modelcalls import cost_of, usage_of
from dashboard.runs.orm import database_sync_to_async

Kind = RunEvent.Kind

LIMITS: Mapping[str, tuple[type, float, str]] = MappingProxyType({
    # key: (type, largest accepted, what it counts)
    "max_tokens": (int, 10**10, "tokens (input and output) the run's model calls report"),
    "max_cost_usd": (float, 10**6, "USD the run's priced model calls cost"),
    "max_model_calls": (int, 10**7, "model calls the run makes"),
    "max_working_minutes": (float, 60 * 24 * 366, "minutes the run works (waits for "
                                                   "people left out)"),
    "max_wall_minutes": (float, 60 * 24 * 366, "minutes from the run's start"),
})
"""Every budget a run may have, each a limit of one figure."""

ACTIONS = ("pause", "stop")
"""What a run does when a budget is reached: waits for an operator, or ends cancelled."""
DEFAULT_ACTION = "stop"
DEFAULT_WARN_AT = 0.8
KEYS = (*LIMITS, "on_limit", "warn_at")


class BudgetInvalid(ValueError):
    """A budget that cannot be taken: ``field`` names the bad key (``budget.max_tokens``)."""

    def __init__(self, field: str, message: str) -> None:
        """Name the bad ``field`` and say what is wrong with it and what would do."""
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Budget:
    """A layer of budgets, or their resolution: the limits it sets (``None``: no limit),
    what each does at its limit, and the share of a limit that warns; keys it does not
    set are left to the layers below it."""

    limits: Mapping[str, float | None] = field(default_factory=lambda: MappingProxyType({}))
    on_limit: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Action by limit key, ``"*"`` for every limit the layer does not name."""
    warn_at: float | None = None

    def over(self, below: Budget) -> Budget:
        """This layer laid over ``below``, field by field."""
        actions = dict(below.on_limit)
        if "*" in self.on_limit:  # a layer's "every budget" replaces the named ones below
            actions = {"*": self.on_limit["*"]}
        actions.update({k: v for k, v in self.on_limit.items() if k != "*"})
        return Budget(limits=MappingProxyType({**below.limits, **self.limits}),
                      on_limit=MappingProxyType(actions),
                      warn_at=self.warn_at if self.warn_at is not None else below.warn_at)

    def limit(self, key: str) -> float | None:
        """The limit of ``key`` (None: no limit)."""
        return self.limits.get(key)

    def action(self, key: str) -> str:
        """What the run does when ``key`` is reached: ``pause`` or ``stop``."""
        return self.on_limit.get(key) or self.on_limit.get("*") or DEFAULT_ACTION

    def share(self) -> float:
        """The share of a limit whose reach warns."""
        return DEFAULT_WARN_AT if self.warn_at is None else self.warn_at

    def active(self) -> dict[str, float]:
        """The limits set, by key."""
        return {k: v for k, v in self.limits.items() if v is not None}

    def __bool__(self) -> bool:
        return bool(self.active())

    def as_json(self) -> dict[str, Any]:
        """The budget as stored and shown (:func:`budget_parse` reads it back)."""
        out: dict[str, Any] = {k: self.limits[k] for k in LIMITS if k in self.limits}
        if self.on_limit:
            out["on_limit"] = dict(self.on_limit)
        if self.warn_at is not None:
            out["warn_at"] = self.warn_at
        return out

    def extended(self, by: Budget) -> Budget:
        """This budget with the limits of ``by`` added to its own (``None`` in ``by``
        lifts that limit)."""
        limits = dict(self.limits)
        for key, more in by.limits.items():
            current = limits.get(key)
            limits[key] = None if more is None or current is None else _typed(
                key, current + more)
        return Budget(limits=MappingProxyType(limits), on_limit=self.on_limit,
                      warn_at=self.warn_at)


NO_BUDGET = Budget()


def _typed(key: str, value: float) -> float:
    kind = LIMITS[key][0]
    return int(value) if kind is int else float(value)


def budget_parse(value: Any, *, field: str = "budget") -> Budget:
    """The one parser of a budget (a JSON object, from any layer); ``BudgetInvalid``
    names the bad key (unknown keys, non-numbers, negative or absurdly large limits,
    unknown actions)."""
    if value is None:
        return NO_BUDGET
    if not isinstance(value, Mapping):
        raise BudgetInvalid(field, f"must be an object such as {{\"max_cost_usd\": 0.5, "
                                   f"\"on_limit\": \"pause\"}}, not {value!r}")
    unknown = sorted(str(k) for k in value if k not in KEYS)
    if unknown:
        raise BudgetInvalid(f"{field}.{unknown[0]}", f"unknown budget {unknown[0]!r}; "
                                                     f"use one of: {', '.join(KEYS)}")
    limits = {key: _limit(value[key], key=key, field=f"{field}.{key}")
              for key in LIMITS if key in value}
    return Budget(limits=MappingProxyType(limits),
                  on_limit=MappingProxyType(_actions(value.get("on_limit"), field=field)),
                  warn_at=_warn_at(value.get("warn_at"), field=f"{field}.warn_at"))


def _number(raw: Any, *, field: str) -> float:
    if isinstance(raw, str):  # a form's field
        try:
            raw = float(raw.strip())
        except ValueError:
            raise BudgetInvalid(field, f"{raw!r} is not a number") from None
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise BudgetInvalid(field, f"{raw!r} is not a number")
    try:
        number = float(raw)
    except OverflowError:  # an integer past any float: absurdly large
        number = math.inf
    if math.isnan(number):
        raise BudgetInvalid(field, f"{raw!r} is not a number")
    return number


def _limit(raw: Any, *, key: str, field: str) -> float | None:
    if raw is None:
        return None  # no limit (widens a layer below)
    number = _number(raw, field=field)
    kind, largest, what = LIMITS[key]
    if number < 0:
        raise BudgetInvalid(field, f"{raw!r} is negative; give the {what} allowed, or null "
                                   "for no limit")
    if number > largest:
        shown = f"{raw!r}" if len(repr(raw)) <= 40 else f"{repr(raw)[:40]}…"
        raise BudgetInvalid(field, f"{shown} is more than {largest:g}, the largest "
                                   "accepted; give a smaller limit, or null for none")
    if kind is int:
        if number != int(number):
            raise BudgetInvalid(field, f"{raw!r} is not a whole number of {what}")
        return int(number)
    return number


def _actions(raw: Any, *, field: str) -> dict[str, str]:
    name = f"{field}.on_limit"
    if raw is None:
        return {}
    if isinstance(raw, str):
        raw = {"*": raw}
    if not isinstance(raw, Mapping):
        raise BudgetInvalid(name, f"{raw!r} is not 'pause', 'stop' or an object of them by "
                                  "budget")
    actions = {}
    for key, action in raw.items():
        if key != "*" and key not in LIMITS:
            raise BudgetInvalid(f"{name}.{key}", f"unknown budget {key!r}; use one of: "
                                                 f"{', '.join(LIMITS)}")
        if action not in ACTIONS:
            raise BudgetInvalid(f"{name}.{key}" if key != "*" else name,
                                f"{action!r} is not one of: {', '.join(ACTIONS)}")
        actions[str(key)] = str(action)
    return actions


def _warn_at(raw: Any, *, field: str) -> float | None:
    if raw is None:
        return None
    number = _number(raw, field=field)
    if not 0 < number <= 1:
        raise BudgetInvalid(field, f"{raw!r} is not a share between 0 and 1 (0.8: warn at "
                                   "80 %)")
    return number


def request_layer(configurable: Mapping[str, Any] | None, context: Any) -> Any:
    """A LangGraph run request's own budget: ``config.configurable.budget``, else
    ``context.budget`` (raw, for :func:`budget_parse`)."""
    if configurable and "budget" in configurable:
        return configurable["budget"]
    if isinstance(context, Mapping):
        return context.get("budget")
    return None


def budget_resolve(*, layers: list[tuple[str, Any]]) -> Budget:
    """The run's budget: each ``(field, raw)`` layer parsed and laid over the ones before
    it (the server's default first, the run request last)."""
    budget = NO_BUDGET
    for name, raw in layers:
        budget = budget_parse(raw, field=name).over(budget)
    return budget


# -- use: what a run spent, against its budget -----------------------------------------


@dataclass(frozen=True)
class Trip:
    """A budget reached: which, its limit, what was used, and what the run does."""

    kind: str
    limit: float
    used: float
    action: str

    def payload(self) -> dict[str, Any]:
        """How events name it (the contract of a final event's ``budget``)."""
        return {"kind": self.kind, "limit": self.limit, "used": self.used}


class BudgetReached(GraphBubbleUp):
    """Raised into a model call that would cross a budget: it is never sent. A signal to
    the runtime, as LangGraph's own interrupt is: graph code that catches ``Exception``
    around its calls and lets ``GraphBubbleUp`` through (LangGraph's rule, which the
    planners keep) leaves it to stop the run at its last checkpoint, rather than recording
    the refused call as the node's failure (a decomposition paused at its budget, then
    extended, used to end "plan failed"); and no retry policy retries it."""

    def __init__(self, trip: Trip) -> None:
        """The budget the call would cross."""
        super().__init__(f"budget {trip.kind} reached: {trip.used:g} of {trip.limit:g}")
        self.trip = trip


@dataclass
class Spent:
    """What a run spent so far (every execution of it), by limit key."""

    tokens: int = 0
    cost_usd: float = 0.0
    model_calls: int = 0
    working_seconds: float = 0.0
    started_at: datetime | None = None

    def of(self, key: str, *, working_since: float | None, now: datetime) -> float:
        """The figure the limit ``key`` counts."""
        if key == "max_tokens":
            return self.tokens
        if key == "max_cost_usd":
            return self.cost_usd
        if key == "max_model_calls":
            return self.model_calls
        if key == "max_working_minutes":
            extra = time.monotonic() - working_since if working_since is not None else 0.0
            return (self.working_seconds + extra) / 60
        started = self.started_at or now
        return max(0.0, (now - started).total_seconds() / 60)


def spent_of(row: Mapping[str, Any] | Run, *, working_seconds: float = 0.0) -> Spent:
    """What a run spent, from its row's rollups (``Run`` or its ``values()``) and its
    working time (:mod:`~dashboard.runs.figures`)."""
    get: Callable[[str], Any] = row.get if isinstance(row, Mapping) else (
        lambda k: getattr(row, k))
    tokens = get("total_tokens")
    if tokens is None:
        tokens = (get("input_tokens") or 0) + (get("output_tokens") or 0)
    return Spent(tokens=tokens, cost_usd=get("cost_usd") or 0.0,
                 model_calls=get("model_calls") or 0, working_seconds=working_seconds,
                 started_at=get("started_at") or get("created_at"))


def call_tokens(usage: Mapping[str, Any] | None) -> int:
    """A call's tokens: its total as reported, else input plus output (0 if none)."""
    if not usage:
        return 0
    total = usage.get("total_tokens")
    if total is None:
        total = (usage.get("input_tokens") or 0) + (usage.get("output_tokens") or 0)
    return int(total)


class BudgetMeter:
    """Holds one execution of a run to its budget: told of each model call, asked at each
    node boundary; records each warning once (``warned``) through ``emit``."""

    def __init__(self, budget: Budget, spent: Spent, *, warned: set[str],
                 emit: Callable[[dict[str, Any]], None]) -> None:
        """Meter ``spent`` against ``budget``; ``warned``: budgets warned of already."""
        self.budget = budget
        self.spent = spent
        self.warned = set(warned)
        self.emit = emit
        self.working_since = time.monotonic()
        self.in_flight = 0
        """Calls sent and not answered yet (parallel tasks' calls count before they end)."""
        self.trip: Trip | None = None
        """The budget reached, once one is (the execution stops for it)."""

    def used(self, key: str) -> float:
        """What the run used of the budget ``key`` so far."""
        return self.spent.of(key, working_since=self.working_since, now=timezone.now())

    def before_call(self, max_tokens: int | None) -> None:
        """A model call is about to be sent: raise :class:`BudgetReached` if it would
        cross a budget (or one is reached already)."""
        trip = self.trip or self._reached(next_call=True, max_tokens=max_tokens)
        if trip is not None:
            self.trip = trip
            raise BudgetReached(trip)
        self.in_flight += 1

    def call_failed(self) -> None:
        """A call sent failed: it is no longer in flight (and spent nothing known)."""
        self.in_flight = max(0, self.in_flight - 1)

    def after_call(self, usage: Mapping[str, Any] | None, cost: float | None) -> None:
        """A model call answered: count it; warn of each budget past its share."""
        self.in_flight = max(0, self.in_flight - 1)
        self.spent.model_calls += 1
        self.spent.tokens += call_tokens(usage)
        self.spent.cost_usd += cost or 0.0
        self.warn()

    def at_boundary(self) -> Trip | None:
        """At a node boundary: the budget reached, if one is (the run stops there)."""
        self.warn()
        if self.trip is None:
            self.trip = self._reached(next_call=False, max_tokens=None)
        return self.trip

    def warn(self) -> None:
        """Record a warning for each budget whose use reached its share, once."""
        share = self.budget.share()
        for key, limit in self.budget.active().items():
            if key in self.warned:
                continue
            used = self.used(key)
            if used >= limit * share:
                self.warned.add(key)
                self.emit({"kind": Kind.BUDGET_WARNING, "payload": {
                    "budget": {"kind": key, "limit": limit, "used": used},
                    "share": share}})

    def _reached(self, *, next_call: bool, max_tokens: int | None) -> Trip | None:
        for key, limit in self.budget.active().items():
            used = self.used(key)
            if key == "max_model_calls":
                used += self.in_flight  # sent: they count, answered or not
                over = used + 1 > limit if next_call else used > limit
            elif key == "max_tokens" and next_call and max_tokens:
                over = used + max_tokens > limit  # its count is known: it would cross
            else:
                over = used >= limit
            if over:
                return Trip(key, limit, used, self.budget.action(key))
        return None



def trip_event(trip: Trip) -> dict[str, Any]:
    """The event of a budget reached (counted for ``/metrics``)."""
    instruments.BUDGET_TRIPS.labels(trip.kind, trip.action).inc()
    return {"kind": Kind.BUDGET_REACHED,
            "payload": {"budget": trip.payload(), "on_limit": trip.action}}


def max_tokens_of(kwargs: Mapping[str, Any]) -> int | None:
    """The most tokens a call may answer with, as its invocation asks (None: unknown)."""
    params = kwargs.get("invocation_params") or {}
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


class BudgetGuard(AsyncCallbackHandler):
    """A LangChain callback handler that holds each model call of a run to its budget:
    one that would cross it raises :class:`BudgetReached` before it is sent."""

    run_inline = True  # in the caller's context: a raise here stops the call
    raise_error = True

    def __init__(self, meter: BudgetMeter, *, prices: Mapping[str, Mapping[str, float]]
                 ) -> None:
        """Guard with ``meter``; price calls with ``prices`` (``PLANWATCH_MODEL_PRICES``)."""
        self.meter = meter
        self.prices = prices
        self.models: dict[uuid.UUID, str | None] = {}
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()

    async def on_chat_model_start(self, serialized: dict[str, Any], messages: Any, *,
                                  run_id: uuid.UUID, metadata: dict[str, Any] | None = None,
                                  **kwargs: Any) -> None:
        """A chat model is about to be called: within the budget, or stopped."""
        self._before(run_id, metadata, kwargs)

    async def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], *,
                           run_id: uuid.UUID, metadata: dict[str, Any] | None = None,
                           **kwargs: Any) -> None:
        """A text LLM is about to be called: within the budget, or stopped."""
        self._before(run_id, metadata, kwargs)

    async def on_llm_end(self, response: LLMResult, *, run_id: uuid.UUID,
                         **kwargs: Any) -> None:
        """A call answered: its tokens and cost count."""
        model = self.models.pop(run_id, None)
        message_model = None
        for batch in response.generations:
            for generation in batch:
                message = getattr(generation, "message", None)
                meta = getattr(message, "response_metadata", None) or {}
                message_model = message_model or meta.get("model_name")
        usage = usage_of(response)
        cost = cost_of(usage, model or message_model, self.prices)
        self._on_loop(self.meter.after_call, usage, cost["total"] if cost else None)

    async def on_llm_error(self, error: BaseException, *, run_id: uuid.UUID,
                           **kwargs: Any) -> None:
        """A call failed: forget it (one this guard refused was never counted)."""
        if self.models.pop(run_id, False) is not False:
            self._on_loop(self.meter.call_failed)

    def _before(self, run_id: uuid.UUID, metadata: Mapping[str, Any] | None,
                kwargs: Mapping[str, Any]) -> None:
        params = kwargs.get("invocation_params") or {}
        model = (metadata or {}).get("ls_model_name") or params.get("model") or params.get(
            "model_name")
        self.meter.before_call(max_tokens_of(kwargs))
        self.models[run_id] = str(model) if model else None  # sent: in flight

    def _on_loop(self, work: Callable[..., None], *args: Any) -> None:
        """Run ``work`` on the executor's loop (a sync node's callbacks come on its thread)."""
        if threading.get_ident() == self.loop_thread:
            work(*args)
        else:
            self.loop.call_soon_threadsafe(work, *args)


MARKS = (Kind.BUDGET_WARNING, Kind.BUDGET_REACHED, Kind.BUDGET_EXTENDED)
"""The events that mark a budget warned or reached, and the extension that clears both."""


def marks_of(events: Iterable[tuple[str, Any]]) -> tuple[set[str], set[str]]:
    """The budgets warned and reached since they were last extended, from ``(kind,
    payload)`` of a run's :data:`MARKS` events in seq order."""
    warned: set[str] = set()
    reached: set[str] = set()
    for kind, payload in events:
        payload = payload if isinstance(payload, dict) else {}
        if kind == Kind.BUDGET_EXTENDED:
            for key in payload.get("extend") or {}:
                warned.discard(key)
                reached.discard(key)
            continue
        name = str((payload.get("budget") or {}).get("kind"))
        (warned if kind == Kind.BUDGET_WARNING else reached).add(name)
    return warned, reached


def marks_query(run_id: Any) -> Any:
    """The ``(kind, payload)`` of a run's :data:`MARKS` events, in seq order."""
    return RunEvent.objects.filter(run_id=run_id, kind__in=MARKS).order_by("seq").values_list(
        "kind", "payload")


@database_sync_to_async
def ameter_for(run_id: uuid.UUID, *, emit: Callable[[dict[str, Any]], None]
               ) -> BudgetMeter | None:
    """The meter of a run about to execute, seeded with what it spent so far (None: the
    run has no budget)."""
    row = Run.objects.filter(id=run_id).values(
        "budget", "total_tokens", "input_tokens", "output_tokens", "cost_usd", "model_calls",
        "started_at", "created_at").first()
    if row is None or not row["budget"]:
        return None
    budget = budget_parse(row["budget"])
    if not budget:
        return None
    spent = spent_of(row)
    warned, _ = marks_of(marks_query(run_id))
    if budget.limit("max_working_minutes") is not None:
        rows = RunEvent.objects.filter(run_id=run_id).order_by("seq").values(
            "seq", "kind", "payload", "at", "created_at")
        spent.working_seconds = figures_of(rows, now=timezone.now()).working
    return BudgetMeter(budget, spent, warned=warned, emit=emit)


@dataclass(frozen=True)
class BudgetPause:
    """Where a run paused at its budget waits: the seq of its ``run_paused`` event (one
    pause apart from the next, once extended) and the budget reached there."""

    seq: int
    reached: dict[str, Any]

    @classmethod
    def of_event(cls, seq: int, kind: str, payload: Any) -> BudgetPause | None:
        """The pause a ``run_paused`` event records if it paused at a budget (its payload
        names it), else None (a breakpoint's, or another event)."""
        budget = payload.get("budget") if kind == Kind.RUN_PAUSED and isinstance(
            payload, dict) else None
        return cls(seq, dict(budget)) if isinstance(budget, dict) else None


def pause_of(run: Run) -> BudgetPause | None:
    """The budget pause a run waits at, or None: it is not paused, or paused at a
    breakpoint."""
    if run.state != Run.State.PAUSED:
        return None
    last = run.events.filter(kind__in=(Kind.RUN_PAUSED, Kind.RUN_CONTINUED)).order_by(
        "-seq").values_list("seq", "kind", "payload").first()
    return None if last is None else BudgetPause.of_event(*last)


def paused_on(run: Run) -> dict[str, Any] | None:
    """The budget a paused run waits at (``{"kind", "limit", "used"}``), or None: it is
    not paused, or paused at a breakpoint."""
    pause = pause_of(run)
    return pause.reached if pause is not None else None


# -- what the pages show -------------------------------------------------------------------

LABELS: Mapping[str, tuple[str, str]] = MappingProxyType({
    "max_tokens": ("Tokens", "{:,.0f}"), "max_cost_usd": ("Cost", "${:,.2f}"),
    "max_model_calls": ("Model calls", "{:,.0f}"),
    "max_working_minutes": ("Working time", "{:,.1f} min"),
    "max_wall_minutes": ("Wall time", "{:,.1f} min")})


def shown(key: str, value: float) -> str:
    """A budget's figure as people read it (``$0.50``, ``1,200``, ``3.5 min``)."""
    return LABELS[key][1].format(value)


@dataclass(frozen=True)
class BudgetUse:
    """One budget of a run, and its use: what the trace header and the API show."""

    key: str
    limit: float
    used: float
    action: str
    warned: bool
    reached: bool

    @property
    def label(self) -> str:
        """What it counts, in words."""
        return LABELS[self.key][0]

    @property
    def percent(self) -> int:
        """Its use in percent of the limit (capped at 100 for the bar)."""
        return 100 if self.limit <= 0 else min(100, round(100 * self.used / self.limit))

    @property
    def text(self) -> str:
        """``$0.31 of $0.50``."""
        return f"{shown(self.key, self.used)} of {shown(self.key, self.limit)}"

    def as_dict(self) -> dict[str, Any]:
        """As the API gives it."""
        return {"kind": self.key, "limit": self.limit, "used": self.used,
                "on_limit": self.action, "warned": self.warned, "reached": self.reached}


def budget_use(run: Run, *, working_seconds: float, warned: set[str], reached: set[str]
               ) -> list[BudgetUse]:
    """Each budget of ``run`` and its use now (the figures the meter holds it to)."""
    budget = budget_parse(run.budget) if run.budget else NO_BUDGET
    spent = spent_of(run, working_seconds=working_seconds)
    now = timezone.now()
    if run.finished_at is not None:
        now = run.finished_at
    return [BudgetUse(key, limit, spent.of(key, working_since=None, now=now),
                      budget.action(key), key in warned, key in reached)
            for key, limit in budget.active().items()]


def extend_text(reached: Mapping[str, Any]) -> str:
    """The question a run paused at its budget asks (``budget of $0.50 reached``)."""
    key = str(reached.get("kind"))
    if key not in LABELS:
        return "a budget was reached"
    return (f"{LABELS[key][0].lower()} budget of {shown(key, float(reached['limit']))} "
            f"reached ({shown(key, float(reached['used']))} used)")
