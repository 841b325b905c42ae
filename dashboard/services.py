"""Writes: start, resume, answer and cancel runs. Every entry point goes through here."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid4

from asgiref.sync import async_to_sync
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as AuthUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from langgraph._internal._constants import NULL_TASK_ID
from langgraph.types import Command

from dashboard import policy
from dashboard.checkpoints import checkpoints_delete, compiled, config_of, sync_saver
from dashboard.models import Interrupt, LangGraphRun, Run, RunEvent, Thread
from dashboard.runs import budgets, debugging, dispatch, doorbells, instruments, states, store
from dashboard.runs.conf import planwatch_setting
from planner.registry import GraphSpec, InputError, get_graph
from planner.steering import SettingsError

logger = logging.getLogger("planwatch.services")

User = AuthUser | AnonymousUser

MAX_ANSWER_BYTES = 64 * 1024


class ServiceError(Exception):
    """A request the service refuses; ``code`` is stable, the message says what to do."""

    code = "invalid"

    def __init__(self, message: str, *, errors: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors or {}


class LimitReached(ServiceError):
    """A limit of the deployment is reached (429); ``limit`` names its setting."""

    code = "limit_reached"

    def __init__(self, message: str, *, limit: str) -> None:
        super().__init__(message, errors={"limit": limit})
        self.limit = limit


class RunInputError(ServiceError):
    """The start input does not fit the graph's input form."""

    code = "invalid_input"


class BudgetError(RunInputError):
    """A budget that cannot be taken (the field named, e.g. ``budget.max_tokens``): 422."""

    code = "invalid_budget"


class RunStateError(ServiceError):
    """The run is not in a state that allows the request (finished, not interrupted …)."""

    code = "run_state"


class DebugInputError(ServiceError):
    """A breakpoint, checkpoint or state edit that the graph or the run does not have."""

    code = "invalid_debug"


class ModelSettingsError(ServiceError):
    """A model, parameter or prompt the graph does not take (422, naming the field)."""

    code = "invalid_model_settings"


class InterruptClosed(ServiceError):
    """The interrupt was answered already or its run moved on or was cancelled."""

    code = "interrupt_closed"

    def __init__(self, message: str, *, interrupt: Interrupt) -> None:
        super().__init__(message)
        self.interrupt = interrupt


class AnswerForbidden(ServiceError):
    """The question is for groups the user is not in (403); the message names them."""

    code = "not_your_question"


ASSIGN_PERMISSION = "dashboard.assign_interrupt"
"""Who may give a question to another operator (a lead)."""


def interrupt_may_answer(*, interrupt: Interrupt, user: User) -> str:
    """Why ``user`` may not answer ``interrupt`` ("" when they may): a question for groups
    is answered by their members and by superusers only; any question only by those who
    may read its run (:mod:`dashboard.policy`). Pages, /api/ and /langgraph/ all ask this,
    through :func:`interrupt_answer`."""
    if not policy.may_read_run(user, interrupt.run):
        return (f"question {interrupt.pk} is of a run you may not read; only its owner and "
                "the team answer it")
    groups = interrupt.group_names
    if not groups or getattr(user, "is_superuser", False):
        return ""
    if user.is_authenticated and user.groups.filter(name__in=groups).exists():
        return ""
    named = ", ".join(repr(g) for g in groups)
    return (f"this question is for the group{'s' if len(groups) > 1 else ''} {named}; only "
            f"{'their' if len(groups) > 1 else 'its'} members (and superusers) may answer "
            f"it. Leave it to them, or ask an administrator to add you to {named}.")


def _check_answerer(interrupt: Interrupt, user: User) -> None:
    reason = interrupt_may_answer(interrupt=interrupt, user=user)
    if reason:
        raise AnswerForbidden(reason, errors={"groups": ", ".join(interrupt.group_names)})


def interrupt_take(*, interrupt: Interrupt, user: User) -> Interrupt:
    """Mark a pending question as ``user``'s ("I'm on it"): others see who has it. Taken
    by someone else already, it stays theirs (a lead reassigns: :func:`interrupt_assign`)."""
    _check_answerer(interrupt, user)
    won = Interrupt.objects.filter(
        Q(assigned_to__isnull=True) | Q(assigned_to=_user_or_none(user)),
        pk=interrupt.pk, status=Interrupt.Status.PENDING,
    ).update(assigned_to=_user_or_none(user), assigned_at=timezone.now(),
             assigned_by_name=_name(user))
    interrupt.refresh_from_db()
    if not won:
        if interrupt.status != Interrupt.Status.PENDING:
            raise InterruptClosed(_closed_message(interrupt), interrupt=interrupt)
        holder = interrupt.assigned_to.get_username() if interrupt.assigned_to else "someone"
        raise InterruptClosed(f"{holder} has taken this question already; a lead (permission "
                              f"{ASSIGN_PERMISSION!r}) can give it to you", interrupt=interrupt)
    _announce(interrupt.run_id)
    return interrupt


def interrupt_assign(*, interrupt: Interrupt, to: AuthUser | None, by: User) -> Interrupt:
    """Give a pending question to ``to`` (``None``: to nobody), as a lead: needs
    :data:`ASSIGN_PERMISSION`, and ``to`` must be one who may answer it."""
    if not by.has_perm(ASSIGN_PERMISSION):
        raise AnswerForbidden(f"giving a question to someone needs the permission "
                              f"{ASSIGN_PERMISSION!r}; ask an administrator for it, or take "
                              "it yourself")
    if to is not None:
        if not policy.may_read_run(to, interrupt.run):
            reason = ("its run is not theirs to read (dashboard.policy: the run's owner and "
                      "the team); give it to one of the team")
        else:
            reason = interrupt_may_answer(interrupt=interrupt, user=to)
        if reason:
            raise ServiceError(f"{to.get_username()} may not answer it: {reason}",
                               errors={"username": "not in the question's groups"})
    won = Interrupt.objects.filter(pk=interrupt.pk, status=Interrupt.Status.PENDING).update(
        assigned_to=to, assigned_at=timezone.now() if to else None,
        assigned_by_name=_name(by) if to else "")
    interrupt.refresh_from_db()
    if not won:
        raise InterruptClosed(_closed_message(interrupt), interrupt=interrupt)
    _announce(interrupt.run_id)
    return interrupt


@dataclass(frozen=True)
class RunOptions:
    """What a client asks of a new run beside its graph and input, as one value: built once
    where the request is parsed (a LangGraph run request, a cron's fire, a page's form,
    /api/) and stored as the run's columns by :func:`run_create`, :func:`run_enqueue` and
    :func:`run_fork`."""

    interrupt_before: list[str] = field(default_factory=list)  # nodes to pause before
    interrupt_after: list[str] = field(default_factory=list)  # nodes to pause after
    metadata: dict[str, Any] = field(default_factory=dict)
    multitask_strategy: str = ""  # LangGraph's, as its run request asked ("": none)
    configurable: dict[str, Any] = field(default_factory=dict)
    context: Any = None
    assistant: Any = None  # the Assistant row that started it (None: the graph's own)
    assistant_version: int | None = None
    recursion_limit: int | None = None  # None: PLANWATCH_RECURSION_LIMIT
    stream_tokens: bool = False  # a LangGraph client streams its messages: tokens as they come
    budget: Any = None  # the request's own budget, as sent (None: its config's, if any)
    model_settings: dict[str, Any] = field(default_factory=dict)
    """Another model, its parameters, other prompts (``planner.steering``; as a client
    sent them: :func:`run_create` and :func:`run_fork` check them against the graph)."""

    def columns(self) -> dict[str, Any]:
        """The options as the run's columns."""
        return {"interrupt_before": list(self.interrupt_before or ()),
                "interrupt_after": list(self.interrupt_after or ()),
                "metadata": dict(self.metadata or {}),
                "multitask_strategy": self.multitask_strategy,
                "configurable": dict(self.configurable or {}), "context": self.context,
                "assistant": self.assistant, "assistant_version": self.assistant_version,
                "recursion_limit": self.recursion_limit, "stream_tokens": self.stream_tokens,
                "model_settings": dict(self.model_settings or {})}


DEFAULT_OPTIONS = RunOptions()
"""A run's options when its caller asks for none (a page's or a command's plain start)."""


def run_create(*, graph: str, input: dict[str, Any], user: User | None,
               thread: Thread | None = None, options: RunOptions = DEFAULT_OPTIONS) -> Run:
    """Validate ``input`` with the graph's registry entry, store a queued run, start it.

    ``options`` carry its breakpoints (nodes to pause before or after) and a client's
    other choices. The run is the first of ``thread`` (LangGraph's server API), or of a new
    thread with its id.
    """
    try:
        spec = get_graph(graph)
    except KeyError as exc:
        raise RunInputError(str(exc.args[0]), errors={"graph": str(exc.args[0])}) from None
    return _queue(spec, user, thread, graph_version=spec.version,
                  input=_input(spec, input), options=options)


def _input(spec: GraphSpec, input: Any) -> Any:
    """``input`` as the graph takes it, or a ``RunInputError`` naming what is wrong."""
    try:
        return spec.make_input(input)
    except InputError as exc:
        raise RunInputError(f"invalid input for {spec.name!r}: {exc}",
                            errors=exc.errors) from None


def _queue(spec: GraphSpec, user: User | None, thread: Thread | None, *, graph_version: int,
           input: Any, options: RunOptions, **columns: Any) -> Run:
    """Store a new queued run of ``spec`` (started, forked or enqueued) and dispatch it once
    the transaction commits: its breakpoints checked against the graph, the user's queued
    runs within ``PLANWATCH_MAX_QUEUED_RUNS_PER_USER``, its thread ``thread`` or a new one
    with the run's id. ``options`` are a client's; ``columns`` the kind's own (parent,
    fork...)."""
    fields = options.columns()
    fields["budget"] = budget_of(spec, options).as_json() or None
    fields["model_settings"] = model_settings_check(graph=spec.name,
                                                    settings=fields["model_settings"])
    before, after = fields["interrupt_before"], fields["interrupt_after"]
    if before or after:
        _check(debugging.check_breakpoints, spec, before=before, after=after)
    run_uuid = uuid4()
    limit = int(planwatch_setting("MAX_QUEUED_RUNS_PER_USER"))
    # no savepoint inside a caller's transaction (a thread's run decision, which holds
    # SQLite's one write lock): its error ends that transaction anyway, and every statement
    # under the lock keeps the executor's writes and the other requests waiting
    with transaction.atomic(savepoint=False):
        owner = _thread_for(thread, run_uuid, spec.name, user)
        # the thread's one checkpoint thread, under the thread's own id (LangGraph's); the
        # user's queued runs counted and the run written in one transaction, under the
        # user's lock (taken after the thread's, as a thread's run decision takes them: one
        # order, no deadlock)
        try:
            run = store.create_run(
                queued_limit=limit, id=run_uuid, graph=spec.name, graph_version=graph_version,
                thread_id=str(owner.id), input=input,
                created_by=_user_or_none(user), created_by_name=_name(user),
                conversation=owner, **fields, **columns)
        except store.QueueFull:
            raise LimitReached(
                f"you have {limit} runs queued, your limit (PLANWATCH_MAX_QUEUED_RUNS_PER_USER="
                f"{limit}); wait for some to start, or cancel some", limit=(
                    "PLANWATCH_MAX_QUEUED_RUNS_PER_USER")) from None
        transaction.on_commit(lambda: _after_create(run))
    return run


def budget_of(spec: GraphSpec, options: RunOptions) -> budgets.Budget:
    """A new run's budget, field by field: the server's default, its graph's, its
    assistant's, its request's (``options.budget``, else its config's or context's
    ``budget``); ``BudgetError`` names a bad field."""
    assistant = options.assistant
    layers: list[tuple[str, Any]] = [
        ("PLANWATCH_BUDGET", planwatch_setting("BUDGET") or None),
        (f"graph {spec.name!r} budget", spec.budget),
        ("assistant config.configurable.budget", ((getattr(assistant, "config", None) or {})
                                                   .get("configurable") or {}).get("budget")),
        ("budget", options.budget if options.budget is not None else budgets.request_layer(
            options.configurable, options.context))]
    try:
        return budgets.budget_resolve(layers=layers)
    except budgets.BudgetInvalid as exc:
        raise BudgetError(str(exc), errors={exc.field: exc.message}) from None


def budget_check(*, value: Any, field: str) -> None:
    """Refuse a budget that cannot be taken (an assistant's, before it reaches a run):
    ``BudgetError`` names the bad ``field``."""
    try:
        budgets.budget_parse(value, field=field)
    except budgets.BudgetInvalid as exc:
        raise BudgetError(str(exc), errors={exc.field: exc.message}) from None


BUDGET_PERMISSION = "dashboard.cancel_run"
"""Who may extend or stop a run paused at its budget (a stop ends it, as a cancel does)."""


def run_budget_may_answer(*, user: User) -> str:
    """Why ``user`` may not extend or stop a run paused at its budget ("" when they may):
    the run page and /langgraph/'s resume ask it (the REST API's ``budget`` action holds
    :data:`BUDGET_PERMISSION` through its permission class, ``CanCancelRuns``)."""
    if user.has_perm(BUDGET_PERMISSION):
        return ""
    return ("you need the 'Can cancel runs' permission (dashboard.cancel_run) to extend or "
            "stop a run's budget; ask an administrator to grant it")


def run_budget_extend(*, run: Run, extend: Any, user: User) -> Run:
    """Raise the budgets of a run paused at one (``extend``: the limits to add, in
    ``budget_parse``'s form) and have it go on."""
    try:
        more = budgets.budget_parse(extend, field="extend")
    except budgets.BudgetInvalid as exc:
        raise BudgetError(str(exc), errors={exc.field: exc.message}) from None
    if not more.limits:
        raise BudgetError("extend: name at least one budget to raise, e.g. "
                          '{"max_cost_usd": 0.5}', errors={"extend": "no budget named"})
    with transaction.atomic():
        locked = store.lock_run(run.id, must=True)
        reached = budgets.paused_on(locked)
        if reached is None or not locked.allows(states.CONTINUE):
            raise RunStateError(f"run {run.id} is {locked.status}, not paused at a budget; "
                                "only a run paused at its budget can have it extended")
        raised = budgets.budget_parse(locked.budget).extended(more)
        store.set_budget(run.id, raised.as_json())
        _record(locked, RunEvent.Kind.BUDGET_EXTENDED, user, extend=more.as_json(),
                budget=raised.as_json())
        _go_on(locked, user, step=False)
    run.refresh_from_db()
    return run


def run_budget_stop(*, run: Run, user: User) -> Run:
    """End a run paused at its budget: cancelled, its final event naming the budget."""
    with transaction.atomic():
        locked = store.lock_run(run.id, must=True)
        reached = budgets.paused_on(locked)
        if reached is None:
            raise RunStateError(f"run {run.id} is {locked.status}, not paused at a budget; "
                                "cancel it instead")
    return run_cancel(run=run, user=user, reason="budget", budget=reached)


def model_settings_check(*, graph: str, settings: dict[str, Any] | None) -> dict[str, Any]:
    """``settings`` (model, temperature, max_tokens, prompts) as graph ``graph`` takes them
    (what changes, to store on the run), or ``ModelSettingsError`` naming each bad field."""
    if not settings:
        return {}
    try:
        return get_graph(graph).model_settings(settings).as_dict()
    except SettingsError as exc:
        raise ModelSettingsError(f"graph {graph!r} does not take these model settings: {exc}",
                                 errors=exc.errors) from None


def interrupt_answer(*, interrupt: Interrupt, answer: Any, user: User,
                     via: str = "", key: str = "") -> Interrupt:
    """Record one answer exactly once; the database decides who was first. ``via`` is
    where it came from (an :class:`Interrupt.Channel`); ``key``, the sender's key of this
    answer: sent again with the same key (its first reply was lost), it is not applied
    again, and is reported as recorded.

    Raises ``AnswerForbidden`` if the question is for groups ``user`` is not in, and
    ``InterruptClosed`` (saying who answered what, and when) if it was answered already,
    or if its run was cancelled or has moved on.
    """
    _check_answerer(interrupt, user)
    _check_answer_size(answer)
    return _answer_once(interrupt, answer, user=_user_or_none(user), name=_name(user), via=via,
                        key=key)


def _answer_once(interrupt: Interrupt, answer: Any, *, user: AuthUser | None, name: str,
                 via: str, key: str = "") -> Interrupt:
    """Record ``answer`` if the question still waits and its run waits for it: the one
    claim every answer goes through (an operator's, a client's, a deadline's default)."""
    now = timezone.now()
    with transaction.atomic():
        # Lock the run (run_cancel locks it too), then one UPDATE with no join: on
        # PostgreSQL a joined UPDATE becomes ``id IN (subquery)``, which is not re-checked
        # after waiting for a concurrent answer's row lock, so both answers would win.
        locked = store.lock_run(interrupt.run_id)
        waiting = locked is not None and locked.allows(states.ANSWER)
        won = waiting and Interrupt.objects.filter(
            pk=interrupt.pk, status=Interrupt.Status.PENDING,
        ).update(status=Interrupt.Status.ANSWERED, answer=answer, answered_by=user,
                 answered_by_name=name, answered_at=now, answered_via=via,
                 answer_key=key[:64])
        interrupt.refresh_from_db()
        if not won and key and interrupt.status == Interrupt.Status.ANSWERED \
                and interrupt.answer_key == key[:64]:
            return interrupt  # this very answer, sent again: applied once already
        if not won:
            raise InterruptClosed(_closed_message(interrupt), interrupt=interrupt)
        run_id = interrupt.run_id
        assert locked is not None
        store.apply(run_id, store.answer(current=locked.state), before=locked)
        instruments.QUESTION_ANSWER_SECONDS.observe(
            max(0.0, (now - interrupt.created_at).total_seconds()))
        transaction.on_commit(lambda: _after_change(run_id, "resume"))
    return interrupt


def interrupt_expire(*, interrupt: Interrupt) -> Interrupt:
    """Apply a question's deadline outcome, once, when it passed unanswered: its default
    answer, recorded as answered by the deadline (through the same claim as every answer),
    or its run cancelled with the reason (the question then ``expired``). Raises
    ``InterruptClosed`` if it was answered, withdrawn or expired meanwhile (by another
    process's sweep, say)."""
    deadline = interrupt.deadline or {}
    if deadline.get("on_expiry") == "answer":
        return _answer_once(interrupt, deadline.get("default"), user=None, name="",
                            via=Interrupt.Channel.DEADLINE)
    with transaction.atomic():
        locked = store.lock_run(interrupt.run_id)
        won = locked is not None and not locked.is_finished and Interrupt.objects.filter(
            pk=interrupt.pk, status=Interrupt.Status.PENDING).update(
                status=Interrupt.Status.EXPIRED)
        interrupt.refresh_from_db()
        if not won:
            raise InterruptClosed(_closed_message(interrupt), interrupt=interrupt)
        asked = interrupt.payload.get("field") if isinstance(interrupt.payload, dict) else None
        run_cancel(run=interrupt.run, user=AnonymousUser(), reason=(
            f"the question {asked or interrupt.interrupt_id!r} passed its deadline "
            f"({interrupt.deadline_at:%Y-%m-%d %H:%M:%S} UTC) unanswered"))
    return interrupt


def run_resume(*, run: Run, answers: dict[str, Any], user: User, via: str = "",
               key: str = "") -> list[Interrupt]:
    """Answer several of a run's pending interrupts (by LangGraph interrupt id) at once
    (``key``: the sender's key of these answers, see :func:`interrupt_answer`)."""
    if not answers:
        raise ServiceError("no answers given; pass {interrupt_id: answer, …}")
    pending = {i.interrupt_id: i for i in run.interrupts.filter(interrupt_id__in=answers)}
    unknown = sorted(set(answers) - set(pending))
    if unknown:
        raise ServiceError(
            f"run {run.id} has no interrupt {', '.join(map(repr, unknown))}; "
            f"its interrupts: {', '.join(run.interrupts.values_list('interrupt_id', flat=True))}",
            errors={"answers": "unknown interrupt id"},
        )
    with transaction.atomic():
        return [
            interrupt_answer(interrupt=pending[iid], answer=value, user=user, via=via,
                             key=key)
            for iid, value in answers.items()
        ]


@dataclass(frozen=True)
class AnswerResult:
    """What became of one answer of several: recorded, or refused and why."""

    interrupt: Interrupt
    ok: bool
    message: str


def interrupts_answer_each(*, answers: list[tuple[Interrupt, Any]], user: User,
                           via: str = Interrupt.Channel.INBOX_MANY) -> list[AnswerResult]:
    """Answer several runs' questions, each exactly once through :func:`interrupt_answer`
    and on its own (one refused answer does not hold back the others); a result per answer,
    in the order given."""
    results = []
    for interrupt, value in answers:
        try:
            interrupt_answer(interrupt=interrupt, answer=value, user=user, via=via)
        except ServiceError as exc:
            results.append(AnswerResult(interrupt, False, exc.message))
        else:
            results.append(AnswerResult(interrupt, True, "answered; the run continues"))
    return results


def run_cancel(*, run: Run, user: User, reason: str = "",
               budget: dict[str, Any] | None = None) -> Run:
    """Cancel a run: at once if nobody executes it, else its executor is asked to stop it,
    which it does at once, the nodes in flight cut (``reason``, if given, is recorded with
    who cancelled it, and the ``budget`` reached that stopped it)."""
    with transaction.atomic():
        locked = store.lock_run(run.id, must=True)
        if not locked.allows(states.CANCEL):
            raise RunStateError(
                f"run {run.id} already {locked.status}; only queued, running or interrupted "
                "runs can be cancelled"
            )
        if store.held_alive(locked, now=timezone.now()):  # its executor: ask it to stop
            store.apply(run.id, store.request_cancel(by=_name(user)))
            transaction.on_commit(lambda: dispatch.request_cancel(run.id))
        else:
            who = user.get_username() if user.is_authenticated else ""
            closing = {"by": who, **({"reason": reason} if reason else {}),
                       **({"budget": budget} if budget else {})}
            store.append_event(
                locked, RunEvent.Kind.RUN_CANCELLED, payload=closing,
                then=lambda seq: store.finish(status=Run.State.CANCELLED, graph=locked.graph,
                                              current=locked.state, now=timezone.now(),
                                              last_seq=seq, closing=closing))
            store.withdraw_questions(run.id)
            transaction.on_commit(lambda: _announce(run.id))
    run.refresh_from_db()
    return run


def run_breakpoints_set(*, run: Run, interrupt_before: list[str],
                        interrupt_after: list[str], user: User) -> Run:
    """Change where a run pauses; a running run takes them at its next node boundary."""
    _check(debugging.check_breakpoints, run.spec, before=interrupt_before,
           after=interrupt_after)
    with transaction.atomic():
        locked = store.lock_run(run.id, must=True)
        if not locked.allows(states.SET_BREAKPOINTS):
            raise RunStateError(f"run {run.id} already {locked.status}; breakpoints apply "
                                "only to queued, running, paused or interrupted runs")
        held = bool(locked.owner)
        fields = store.set_breakpoints(before=interrupt_before, after=interrupt_after,
                                             held=held)
        store.apply(run.id, fields)
        if held:  # its executor numbers the events: it records the change when it applies it
            transaction.on_commit(lambda: dispatch.request_breakpoints(run.id))
        else:
            _record(locked, RunEvent.Kind.BREAKPOINTS_CHANGED, user,
                    before=interrupt_before, after=interrupt_after)
    run.refresh_from_db()
    return run


def run_stream_tokens_set(*, run: Run, stream_tokens: bool) -> None:
    """Have a run's model calls stream their tokens to its watchers from its next execution
    on, or not: the LangGraph run request that goes on with it asked for the messages or
    messages-tuple stream mode, or did not."""
    if run.stream_tokens != stream_tokens:
        store.set_stream_tokens(run.id, stream_tokens)
        run.stream_tokens = stream_tokens


def run_continue(*, run: Run, user: User, step: bool = False) -> Run:
    """Continue a run paused at a breakpoint, to the next breakpoint or one super-step on."""
    with transaction.atomic():
        locked = store.lock_run(run.id, must=True)
        if not locked.allows(states.CONTINUE):
            raise RunStateError(f"run {run.id} is {locked.status}, not paused at a breakpoint; "
                                "only paused runs can be continued or stepped")
        _go_on(locked, user, step=step)
    run.refresh_from_db()
    return run


def _go_on(locked: Run, user: User, *, step: bool) -> None:
    """A paused run (``locked``, under its lock) goes on: its ``run_continued`` event and
    the continue transition, then its executor is told once the change commits."""
    store.append_event(locked, RunEvent.Kind.RUN_CONTINUED,
                       payload={"by": user.get_username(), "step": step},
                       then=lambda seq: store.continue_run(
                           current=locked.state, now=timezone.now(), last_seq=seq,
                           step=step))
    transaction.on_commit(lambda: _after_change(locked.id, "continue"))


NO_INPUT = object()
"""``run_fork``'s ``input`` when the fork goes on from its checkpoint with no new input."""


def run_fork(*, run: Run, checkpoint_id: str, user: User, values: Any = None,
             as_node: str = "", input: Any = NO_INPUT, thread: Thread | None = None,
             options: RunOptions = DEFAULT_OPTIONS) -> Run:
    """Start a new run from one of ``run``'s checkpoints, with ``values`` edited in first.

    The edit is checked against the graph's state schema before anything is written; the
    fork is linked to its parent and checkpoint, and traced, answerable and recoverable
    like any run. With ``input`` it continues from there with that input (a thread's next
    run, in LangGraph's terms); it belongs to ``thread``, or to a new thread of its own.
    """
    spec = run.spec
    if not run.events.filter(kind=RunEvent.Kind.CHECKPOINT, namespace="",
                             checkpoint_id=checkpoint_id).exists():
        raise DebugInputError(
            f"run {run.id} has no checkpoint {checkpoint_id!r}; pick one from its timeline "
            f"or from /api/runs/{run.id}/checkpoints/",
            errors={"checkpoint_id": "not a checkpoint of this run"})
    edit: dict[str, Any] | None = None
    if values is not None:
        _check(debugging.check_edit, spec, values, as_node=as_node,
               fields=spec.state_fields(values))
        edit = {"values": debugging.typed_edit(values, spec.state_fields(values)),
                "as_node": as_node}
    if input is not NO_INPUT and input is not None:
        edit = {**(edit or {}), "input": _input(spec, input)}
    return _queue(spec, user, thread, graph_version=run.graph_version, input=run.input,
                  options=options, parent=run, forked_from_checkpoint=checkpoint_id, fork_edit=edit)


MAX_FORKS_AT_ONCE = 8
"""The most forks :func:`run_fork_ways` starts from one checkpoint at once."""


def run_fork_ways(*, run: Run, checkpoint_id: str, user: User,
                  ways: list[dict[str, Any]]) -> list[Run]:
    """Start one fork of ``run`` from ``checkpoint_id`` for each of ``ways`` (each a model
    choice: model, temperature, max_tokens, prompts), all or none: every way is checked
    first (``ModelSettingsError`` naming ``ways.<n>.<field>``)."""
    if not 2 <= len(ways) <= MAX_FORKS_AT_ONCE:
        raise ModelSettingsError(
            f"{len(ways)} ways given; fork 2 to {MAX_FORKS_AT_ONCE} ways at once",
            errors={"ways": f"give 2 to {MAX_FORKS_AT_ONCE}"})
    errors: dict[str, str] = {}
    for index, way in enumerate(ways):
        try:
            model_settings_check(graph=run.graph, settings=way)
        except ModelSettingsError as exc:
            errors.update({f"ways.{index}.{name}": text for name, text in exc.errors.items()})
    if errors:
        raise ModelSettingsError(f"graph {run.graph!r} does not take these model settings: "
                                 + "; ".join(f"{k}: {v}" for k, v in errors.items()),
                                 errors=errors)
    with transaction.atomic():
        return [run_fork(run=run, checkpoint_id=checkpoint_id, user=user,
                         options=RunOptions(model_settings=dict(way))) for way in ways]


def thread_create(*, user: User | None, thread_id: UUID | None = None, graph: str = "",
                  metadata: dict[str, Any] | None = None) -> Thread:
    """A new thread (LangGraph's server API), its creator's name kept beside the link."""
    return Thread.objects.create(id=thread_id or uuid4(), graph=graph, metadata=metadata or {},
                                 created_by=_user_or_none(user), created_by_name=_name(user))


def thread_update(*, thread: Thread, metadata: dict[str, Any]) -> Thread:
    """Merge ``metadata`` into the thread's (LangGraph's ``PATCH /threads/<id>``)."""
    thread.metadata = {**(thread.metadata or {}), **metadata}
    thread.save(update_fields=["metadata", "updated_at"])
    return thread


def thread_delete(*, thread: Thread) -> None:
    """Delete a thread with its runs, their events and their LangGraph checkpoints;
    refused while one of its runs executes, waits to, or is about to resume."""
    with transaction.atomic():
        Thread.objects.select_for_update().filter(pk=thread.pk).first()
        busy = Run.objects.busy().filter(conversation=thread).first()
        if busy is not None:
            raise RunStateError(f"thread {thread.id} is busy with run {busy.id} "
                                f"({busy.status}); cancel it first")
        held = {str(thread.id), *thread.runs.values_list("thread_id", flat=True)}
        thread.delete()
        transaction.on_commit(lambda: checkpoints_delete(threads=sorted(held)))


def run_delete(*, run: Run) -> None:
    """Delete a run that is not busy, its events and its LangGraph checkpoints; its
    thread's status is then its latest remaining run's."""
    with transaction.atomic():
        locked = store.lock_run(run.id, must=True)
        if not locked.allows(states.DELETE):
            raise RunStateError(f"run {run.id} is {locked.status}; cancel it before deleting it")
        store.delete_run(locked)


def langgraph_run_roll_back(*, langgraph_run: LangGraphRun, user: User) -> str:
    """Cancel a LangGraph run and roll it back (LangGraph's ``cancel?action=rollback``):
    the request is written with the cancel, in one transaction, and carried out once the
    run stopped, by whoever sees it stop (:func:`run_roll_back_stopped`; at once when no
    executor holds the run). Its ``Run``'s first is rolled back by deleting the ``Run``;
    a later one (a resume, a continue) by taking the ``Run`` back to where it waited
    before it (``store.roll_back_requested``). Returns what was done now (``""``: it is
    done when the run stops)."""
    with transaction.atomic():
        locked = store.lock_run(langgraph_run.run_id, must=True)
        current = locked.langgraph_runs.current().filter(id=langgraph_run.id).exists()
        if not (current and locked.is_busy()):
            why = "neither pending nor running" if current else "superseded by a later one"
            raise RunStateError(f"run {langgraph_run.id} is {why}: there is nothing to cancel "
                                "and roll back")
        store.request_roll_back(langgraph_run.id, now=timezone.now())
        run_cancel(run=locked, user=user)
        done = run_roll_back_stopped(run_id=locked.id)
    return done


def run_roll_back_stopped(*, run_id: UUID) -> str:
    """Roll back the LangGraph run of ``run_id`` a client asked to roll back, if the run has
    stopped (exactly once, whoever asks first); what was done (``""``: nothing, yet or
    any more). The run's watchers, the runs list and the inbox are told."""
    return dispatch.roll_back_stopped(run_id)


def run_enqueue(*, after: Run, input: Any, user: User, thread: Thread,
                options: RunOptions) -> Run:
    """Queue a run behind ``after`` on its thread (LangGraph's multitask "enqueue"): it
    starts once ``after`` stops, from its last checkpoint then, with ``input``."""
    spec = after.spec
    edit = {"input": _input(spec, input)} if input is not None else None
    return _queue(spec, user, thread, graph_version=after.graph_version,
                  input=(edit or {}).get("input", after.input), options=options,
                  parent=after, waits_for=after, fork_edit=edit)


def _thread_for(thread: Thread | None, run_uuid: UUID, graph: str, user: User | None
                ) -> Thread:
    """``thread`` (now of ``graph``: the run's write records it), or a new thread for the
    run, with the run's id."""
    if thread is None:
        return thread_create(user=user, thread_id=run_uuid, graph=graph)
    thread.graph = graph
    return thread


def _user_or_none(user: User | None) -> AuthUser | None:
    return user if isinstance(user, AuthUser) and user.is_authenticated else None


def state_edit_errors(*, graph: str, values: dict[str, Any], as_node: str = "") -> dict[str, str]:
    """What the graph would refuse in a state edit, by channel ({} when it takes it all)."""
    spec = get_graph(graph)
    try:
        _check(debugging.check_edit, spec, values, as_node=as_node,
               fields=spec.state_fields(values))
    except DebugInputError as exc:
        return dict(exc.errors)
    return {}


def _check(rule: Any, spec: GraphSpec, *args: Any, **kwargs: Any) -> None:
    """Apply one of :mod:`dashboard.runs.debugging`'s checks to the graph's builder."""
    try:
        rule(spec.inspection_builder, *args, **kwargs)
    except debugging.EditError as exc:
        raise DebugInputError(str(exc), errors=exc.errors) from None


def _record(locked: Run, kind: str, user: User, **payload: Any) -> None:
    """Record an operator's action on a run nobody executes (the row is locked)."""
    store.append_event(locked, kind, payload={"by": user.get_username(), **payload})


def run_recover_stale(*, include_queued: bool = False) -> list[UUID]:
    """Hand every run whose executor stopped heart-beating to an executor again."""
    return dispatch.recover_stale(include_queued=include_queued)


def _name(user: User | None) -> str:
    """The username kept with a record, so the audit trail outlives the account."""
    return user.get_username() if user is not None and user.is_authenticated else ""


def _check_answer_size(answer: Any) -> None:
    size = len(json.dumps(answer, default=str))
    if size > MAX_ANSWER_BYTES:
        raise ServiceError(
            f"answer is {size:,} bytes; the limit is {MAX_ANSWER_BYTES:,}. Shorten it.",
            errors={"answer": f"too long ({size:,} bytes, limit {MAX_ANSWER_BYTES:,})"},
        )


def _closed_message(interrupt: Interrupt) -> str:
    if interrupt.status == Interrupt.Status.ANSWERED:
        who = interrupt.answerer_name or "someone"
        when = interrupt.answered_at.strftime("%Y-%m-%d %H:%M:%S UTC") if interrupt.answered_at \
            else "earlier"
        return f"already answered by {who} at {when} with {interrupt.answer!r}; nothing changed"
    if interrupt.status == Interrupt.Status.CANCELLED:
        return "this question was withdrawn (its run was cancelled or moved on); nothing changed"
    if interrupt.status == Interrupt.Status.EXPIRED:
        return "this question's deadline passed and its run was cancelled; nothing changed"
    return (f"run is {interrupt.run.status}, not waiting for an answer; nothing changed")


def _after_change(run_id: UUID, mode: str) -> None:
    dispatch.dispatch(run_id, mode)
    _announce(run_id)


def _after_create(run: Run) -> None:
    """A new queued run: tell the runs list, then dispatch it. Told first, from the row
    just written (nothing else can have changed it yet; a new run asks the inbox no
    question), "queued" never reaches a watcher after the executor's "running"."""
    _announce(run.id, summary={name: getattr(run, name) for name in doorbells.SUMMARY_FIELDS})
    dispatch.dispatch(run.id, "start")


def _announce(run_id: UUID, *, summary: dict[str, Any] | None = None) -> None:
    """Tell the runs list and the run's page of the run as it stands (and the inbox, whose
    questions may have changed, unless ``summary`` says the run is new)."""
    new = summary is not None
    row: dict[str, Any] = (summary if summary is not None
                           else Run.objects.values(*doorbells.SUMMARY_FIELDS).get(id=run_id))
    try:
        # a new run's own group has no watcher yet (nobody knew its id): the runs list only
        async_to_sync(doorbells.abroadcast_run)(doorbells.run_summary(row), watchers=not new)
        if not new:
            async_to_sync(doorbells.abroadcast_inbox)()
    except RuntimeError:  # called from inside an event loop thread
        logger.debug("announce skipped for %s (inside an event loop)", run_id)


def run_state_edit_check(*, run: Run, values: Any, as_node: str) -> None:
    """Check an edit of ``run``'s state as :func:`run_update_state` does, writing nothing
    (``DebugInputError`` naming each bad channel, or ``as_node``)."""
    spec = run.spec
    if values is None:  # no values: the node ran and wrote nothing (``__end__``: it ended)
        _check(debugging.check_as_node, spec, as_node)
    else:
        _check(debugging.check_edit, spec, values, as_node=as_node,
               fields=spec.state_fields(values))


def run_command_update(*, run: Run, update: Any) -> None:
    """``Command(update=…)`` for a run that goes on from its last checkpoint (answered, or
    continued past a breakpoint): as LangGraph maps a command's update, its values become
    writes of no task on that checkpoint, which LangGraph applies through the channels'
    reducers before anything else when the run goes on (and state reads show meanwhile).
    Checked against the graph's state schema first, as a state edit is."""
    run_state_edit_check(run=run, values=update, as_node="")
    with sync_saver() as saver:
        tup = saver.get_tuple(config_of(run))
        if tup is None:
            raise RunStateError(f"run {run.id} has no checkpoint to update yet")
        saver.put_writes(tup.config, Command(update=update)._update_as_tuples(),
                         NULL_TASK_ID)


def run_update_state(*, run: Run, values: Any, as_node: str, user: User,
                     checkpoint_id: str = "") -> str:
    """Write ``values`` into a run's state as ``as_node`` would (LangGraph's update_state).

    Only a run no executor holds can be edited; the edit is checked against the graph's
    state schema first, and recorded in the run's log as a checkpoint with who and what.
    Returns the new checkpoint's id.
    """
    run_state_edit_check(run=run, values=values, as_node=as_node)
    if values is not None:  # each declared field kept as its check makes it
        values = debugging.typed_edit(values, run.spec.state_fields(values))

    def refuse_if_held(current: Run) -> None:
        if current.owner or not current.allows(states.EDIT_STATE):
            raise RunStateError(f"run {run.id} is {current.status}; its state can be edited "
                                "once it stops (wait for it, or cancel it)")

    refuse_if_held(Run.objects.get(id=run.id))
    # through LangGraph, on a saver of its own (graphs with async routes need the async
    # API), before the event is recorded: a checkpoint without its event is harmless
    config, snap = async_to_sync(debugging.aupdate_state)(
        compiled(run.graph),
        config_of(run, checkpoint_id or None, naming=run.langgraph_run_ids()[0]), values,
        as_node=as_node, spec=run.spec)
    new_id = str(config["configurable"]["checkpoint_id"])
    parent = (snap.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    with transaction.atomic():
        locked = store.lock_run(run.id, must=True)
        store.append_event(
            locked, RunEvent.Kind.CHECKPOINT, checkpoint_id=new_id,
            step=(snap.metadata or {}).get("step"),
            payload={"source": "update", "next": list(snap.next), "by": _name(user),
                     "as_node": as_node, "values": values, "parent_checkpoint_id": parent})
        transaction.on_commit(lambda: _announce(run.id))
    return new_id
