"""What a run request does to a thread, through the run service: the LangGraph API's
run requests (``lgserver``), its state updates (``POST /threads/<id>/state``, a
:class:`Command` too) and the crons' runs (``crons``) all decide here.

A thread's next run is decided here, and only here (:func:`_decide`, writing nothing, then
:func:`_next_run` applies the decision):

- no run yet: a new run with the input (``services.run_create``);
- a command (:class:`Command`, parsed once where the request comes in: a resume, an update
  alone, or goto ``'__end__'``) is decided here too, under the same lock, and applied once
  (:func:`_decide_command`); what it writes through LangGraph's own saver is written once
  the decision committed (:func:`written`);
- ``command={"resume": …}``: the thread's interrupted run is answered (one answer, or a
  map by interrupt id) and goes on; the LangGraph run is that same run, with the request's
  breakpoints; a graph that declares ``review_questions`` takes the standard decisions
  (``planner.questions.review_of``): an answer, or a declined question, which stops the run;
  its update, if any, is written as the answer is recorded;
- ``command={"resume": …}`` on a run paused at its budget: the interrupt Planwatch shows
  for that pause (:mod:`dashboard.budget_reviews`) is answered: the budget extended (the
  run goes on) or the run stopped, by the services the run page and the REST API call;
- ``input=None`` on a run paused at a breakpoint: it continues (``services.run_continue``);
- otherwise (new input on an ended run, or ``checkpoint_id``): a fork of the run holding
  the checkpoint, from there, with the input (``services.run_fork``);
- a state update (``Command.state_update``): as an update alone of an ended thread, on
  any thread no run is busy on, its updates written as its ``as_node``; as ``__end__`` on
  a waiting run, that run ends as goto ``'__end__'`` ends it;
- the thread is busy: ``multitask_strategy`` decides — ``reject`` (409), ``interrupt``
  (the busy run is cancelled, the new one starts from its last checkpoint), ``rollback``
  (cancelled, and the new one starts from where the busy run started) or ``enqueue`` (the
  new run waits, queued, until the busy one stops, then goes on from its last checkpoint).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from django.db import connection, transaction
from langgraph.constants import END

from dashboard import budget_reviews, services
from dashboard.models import Interrupt, LangGraphRun, Run, RunEvent, Thread
from dashboard.runs import budgets, states, store
from dashboard.services import RunInputError, RunOptions, RunStateError, ServiceError, User
from planner.questions import review_of

STRATEGIES = ("reject", "interrupt", "rollback", "enqueue")


class ThreadBusy(RunStateError):
    """The thread's run executes and the request's strategy is ``reject``."""

    code = "thread_busy"


class Unsupported(ServiceError):
    """A part of LangGraph's API Planwatch does not serve (the message says what to use)."""

    code = "unsupported"


RESERVED_CONFIGURABLE = frozenset({
    "thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map", "checkpoint_during",
    "checkpointer", "run_id", "langgraph_step", "langgraph_node", "langgraph_triggers",
    "langgraph_path", "langgraph_checkpoint_ns", "task_id",
})
"""Keys of ``config.configurable`` that LangGraph (or Planwatch) sets for a run."""


def reserved_keys(configurable: dict[str, Any]) -> list[str]:
    """The keys of ``configurable`` a client may not set (LangGraph's ``__pregel_*`` and
    other internal keys, and the checkpoint's own), sorted."""
    return sorted(str(k) for k in configurable
                  if k in RESERVED_CONFIGURABLE or str(k).startswith("__"))


def reserved_config(config: Any) -> str:
    """Why ``config`` (a run's, an assistant's or a cron's) may not reach a run ("" if it
    may): its ``configurable`` names keys LangGraph or Planwatch sets, or the config
    itself carries LangGraph's internal ``__…`` keys. Every place a config comes from
    asks this: a run request, an assistant's create and update, a cron's payload and
    each of its fires."""
    if not isinstance(config, dict):
        return ""
    configurable = config.get("configurable")
    keys = reserved_keys(configurable) if isinstance(configurable, dict) else []
    keys += sorted(str(k) for k in config if str(k).startswith("__"))
    if not keys:
        return ""
    return (f"{', '.join(keys)} are Planwatch's (LangGraph's) to set; pass the thread in "
            "the URL and a past checkpoint as checkpoint_id")


class CommandKind(StrEnum):
    """What a request's :class:`Command` does to its thread."""

    RESUME = "resume"  # its interrupted run is answered (its update, if any, goes in first)
    UPDATE = "update"  # the update alone: a waiting run takes it, an ended one's state too
    END = "end"  # goto '__end__': its run ends where it stands (its update, if any, first)
    STATE = "state"  # POST /threads/<id>/state: update_state, one checkpoint an update


COMMAND_KEYS = ("resume", "update", "goto")
"""The keys of LangGraph's ``Command`` a run request may send (langgraph-sdk's)."""


@dataclass(frozen=True)
class Command:
    """A run request's ``command``, parsed once where the request comes in
    (:meth:`parse`): nothing later reads the client's dict again; or a state update
    (:meth:`state_update`), decided and written by the same rules."""

    kind: CommandKind
    resume: Any = None  # a resume's answer (a value, or a map by interrupt id)
    update: Any = None  # None: no update
    updates: tuple[Any, ...] = ()  # a state update's, in order (None: as_node wrote nothing)
    as_node: str = ""  # a state update's: the node its updates are written as

    @classmethod
    def state_update(cls, updates: Sequence[Any], as_node: str) -> Command:
        """``POST /threads/<id>/state`` (LangGraph's ``update_state``): ``updates`` written
        as ``as_node``, one checkpoint each, in order (its request's ``checkpoint_id``, if
        any, the first's parent); as ``__end__`` it ends the thread's run, as goto
        ``'__end__'`` does."""
        return cls(CommandKind.STATE, updates=tuple(updates), as_node=as_node)

    @classmethod
    def parse(cls, raw: Any) -> Command | None:
        """The command a client sent (None for none, or ``{}``); a shape Planwatch does
        not serve is refused naming ``command.<field>`` and the way out."""
        if raw is None:
            return None
        if not isinstance(raw, dict):
            raise RunInputError("command is an object such as {\"resume\": …}",
                                errors={"command": "an object such as {\"resume\": …}"})
        if not raw:
            return None  # as LangGraph's server: an empty command is none
        if unknown := sorted(str(k) for k in raw if k not in COMMAND_KEYS):
            raise Unsupported(
                f"command {unknown} is not served here; a run request takes "
                "Command(resume=…, update=…), or goto '__end__'",
                errors={f"command.{k}": "only resume, update and goto '__end__'"
                        for k in unknown})
        update = raw.get("update")
        if "goto" in raw:
            if raw["goto"] != END or "resume" in raw:
                field = "command.goto" if raw["goto"] != END else "command.resume"
                raise Unsupported(
                    f"command {raw!r} is not served: Planwatch takes goto '__end__' (with an "
                    "optional update, and no resume) to end a thread's run; answer with "
                    "Command(resume=…) alone, and edit state with POST /threads/<id>/state",
                    errors={field: "only goto '__end__', without a resume"})
            return cls(CommandKind.END, update=update)
        if "resume" in raw:
            return cls(CommandKind.RESUME, resume=raw["resume"], update=update)
        if update is None:
            raise RunInputError("the command has nothing to do: give it a resume, an update "
                                "or goto '__end__'",
                                errors={"command.update": "empty command"})
        return cls(CommandKind.UPDATE, update=update)


@dataclass(frozen=True)
class RunRequest:
    """The parts of a LangGraph run request that decide what happens, parsed once."""

    assistant_id: str
    input: Any = None
    command: Command | None = None
    checkpoint_id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    interrupt_before: list[str] = field(default_factory=list)
    interrupt_after: list[str] = field(default_factory=list)
    multitask_strategy: str = "reject"
    configurable: dict[str, Any] = field(default_factory=dict)
    context: Any = None
    assistant: Any = None  # the Assistant row that started it (None: the graph's own)
    assistant_version: int | None = None
    recursion_limit: int | None = None  # None: PLANWATCH_RECURSION_LIMIT
    stream_tokens: bool = False  # it streams the messages or messages-tuple mode
    model_settings: dict[str, Any] = field(default_factory=dict)  # its configurable's model

    def run_options(self) -> RunOptions:
        """What every new run of the request is created with."""
        return RunOptions(
            interrupt_before=self.interrupt_before, interrupt_after=self.interrupt_after,
            metadata=self.metadata, multitask_strategy=self.multitask_strategy,
            configurable=self.configurable, context=self.context, assistant=self.assistant,
            assistant_version=self.assistant_version, recursion_limit=self.recursion_limit,
            stream_tokens=self.stream_tokens, model_settings=self.model_settings)


class Way(StrEnum):
    """How a thread goes on after a run request (:class:`Next`)."""

    RESUME = "resume"  # its interrupted run is answered and goes on
    BUDGET = "budget"  # its run paused at its budget is extended (goes on) or stopped
    CONTINUE = "continue"  # its run paused at a breakpoint goes on
    CREATE = "create"  # a new run from nothing (no run yet, or nothing to go on from)
    ENQUEUE = "enqueue"  # a new run waits behind the busy one
    FORK = "fork"  # a new run from a checkpoint of one of its runs
    UPDATE = "update"  # its waiting run takes a command's update (one paused goes on)
    EDIT = "edit"  # its ended run's state takes a command's update (:func:`written`)
    END = "end"  # its run ends where it stands (goto '__end__'; :func:`written`)


@dataclass(frozen=True)
class Next:
    """What a run request does to its thread, decided before anything is written: the runs
    it cancels first, then the way the thread goes on."""

    way: Way
    cancel: tuple[Run, ...] = ()  # the busy run and its queue, or a run left waiting
    run: Run | None = None  # resumed or continued; waited for (enqueue); forked from
    checkpoint: str = ""  # a fork's
    # a resume's: its answers (by interrupt id) to its pending questions, whether the
    # client named them by id, where they came from; or the question it declined and why
    answers: dict[str, Any] = field(default_factory=dict)
    questions: dict[str, Interrupt] = field(default_factory=dict)
    by_id: bool = False
    via: str = ""
    declined: Interrupt | None = None
    why: str = ""  # or why an end stops the run waiting
    update: Any = None  # a resume's or a waiting run's command update (None: none)
    edit: Edit | None = None  # what an edit or an end writes once decided (:func:`written`)
    budget: budget_reviews.BudgetAnswer | None = None  # a budget pause's answer


@dataclass(frozen=True)
class Edit:
    """What a command or a state update writes through LangGraph's own saver once its
    decision committed (:func:`written`): each of ``updates`` into ``run``'s state as
    ``as_node`` (the first on ``checkpoint``, else the run's newest), then, if ``ends``,
    the ``__end__`` that ends it there; only while the run's newest checkpoint is still
    ``seen``, the one it was decided on."""

    run: Run
    seen: str  # the run's newest checkpoint when it was decided: written only if still so
    updates: tuple[Any, ...] = ()
    as_node: str = ""
    checkpoint: str = ""
    ends: bool = False


@dataclass(frozen=True)
class Started:
    """What a run request did under the thread's lock: the LangGraph run it made or goes
    on with, the seq of its ``Run``'s log the request's stream starts after, and the edit
    still to write once the decision committed (None: nothing)."""

    langgraph_run: LangGraphRun
    after: int
    edit: Edit | None = None
    checkpoint: str = ""  # the last checkpoint its edit wrote (once written)


@contextmanager
def locked(thread: Thread, *, user: User | None = None) -> Iterator[None]:
    """Hold the thread's row for the decision about its next run, until it is committed;
    with ``user`` (a request that may create a run), the user's row after it, whose queued
    runs a new run counts (``store.thread_locked``: one statement).

    A conditional UPDATE takes the row's lock on PostgreSQL; on SQLite the IMMEDIATE
    transaction already holds the database's one write lock, and every statement inside
    it keeps every other writer (the executor's checkpoints and events) waiting, so it
    adds none. Concurrent run requests on one thread decide one after another, each
    seeing what the one before it did. What may execute is the constraint
    ``run_one_running_per_thread``'s to guarantee; this keeps the requests' answers and
    queues consistent.
    """
    user_id = user.pk if user is not None and user.is_authenticated else None
    with transaction.atomic(), store.thread_locked(thread.pk, user_id=user_id):
        yield


@contextmanager
def page_edit(run: Run, seen: str) -> Iterator[None]:
    """A run page's edit of ``run``'s paused state (and its continue), decided on
    checkpoint ``seen`` (the one the page showed): held as a run request's edit is
    (:func:`written`), on PostgreSQL under the thread's lock (on SQLite unlocked: the
    saver's own connection writes), and only while ``seen`` is still the run's newest
    checkpoint; else :class:`RunStateError` (409), nothing written."""
    with edit_held(run.conversation):
        newest = run.last_root_checkpoint()
        if newest != seen:
            raise RunStateError(
                f"run {run.id} moved on since its state was shown (it was at checkpoint "
                f"{seen or '(none)'}, it is now at {newest or '(none)'}); nothing was "
                "written: reload its state, then edit it again if the edit still applies")
        yield


def creates_runs(req: RunRequest) -> bool:
    """Whether ``req`` may create a run (a command never does: it answers, continues or
    ends the thread's run)."""
    return req.command is None


def holder_of(thread: Thread, checkpoint_id: str) -> Run:
    """The run of ``thread`` that wrote ``checkpoint_id``; ``RunInputError`` names the way out."""
    run = (Run.objects.filter(conversation=thread, events__kind=RunEvent.Kind.CHECKPOINT,
                              events__namespace="", events__checkpoint_id=checkpoint_id)
           .order_by("-created_at").first())
    if run is None:
        raise RunInputError(
            f"thread {thread.id} has no checkpoint {checkpoint_id!r}; list them with "
            f"POST /threads/{thread.id}/history", errors={"checkpoint_id": "unknown checkpoint"})
    return run


def start(thread: Thread, req: RunRequest, user: User, current: Run | None) -> Started:
    """Start (or resume, or continue, or update, or end) the thread's next run after
    ``current`` (its :meth:`~dashboard.models.Thread.latest_run`), under :func:`locked`:
    the LangGraph run the request made (its ``run`` is the ``Run`` that goes on), a new
    ``Run``'s first, or the one a resume or a continue of ``current`` made (``store.apply``,
    as any answer or continue does), read in the caller's transaction; a new ``Run``'s as
    it was written, not read back. An update of an ended run, or an end, leaves its
    :class:`Edit` for :func:`written` once the caller's transaction committed."""
    return _next_run(thread, req, user, current)


def _next_run(thread: Thread, req: RunRequest, user: User, current: Run | None
              ) -> Started:
    """The LangGraph run of the ``Run`` that goes on for :func:`start`: decided
    (:func:`_decide`), then done, here and only here."""
    nxt = _decide(thread, req, current)
    options = req.run_options()
    if nxt.way in (Way.UPDATE, Way.EDIT, Way.END):
        return _command_applied(thread, nxt, user)
    for run in nxt.cancel:
        services.run_cancel(run=run, user=user)
    if nxt.way == Way.CREATE:
        return _first(services.run_create(
            graph=req.assistant_id, input=req.input or {}, user=user, thread=thread,
            options=options))
    assert nxt.run is not None
    if nxt.way == Way.ENQUEUE:
        return _first(services.run_enqueue(
            after=nxt.run, input=req.input, user=user, thread=thread, options=options))
    if nxt.way == Way.FORK:
        return _first(services.run_fork(
            run=nxt.run, checkpoint_id=nxt.checkpoint, user=user, thread=thread,
            input=req.input if req.input is not None else services.NO_INPUT,
            options=options))
    goes = nxt.run
    stops = nxt.declined is not None or (nxt.budget is not None and nxt.budget.stops)
    if nxt.declined is not None:
        # declining ends the run: only one who may answer the question may decline it
        if reason := services.interrupt_may_answer(interrupt=nxt.declined, user=user):
            raise services.AnswerForbidden(reason)
        goes = services.run_cancel(run=goes, user=user, reason=nxt.why)
    elif nxt.budget is not None:  # as the run page and the REST API extend or stop it
        if reason := services.run_budget_may_answer(user=user):
            raise services.AnswerForbidden(reason)
        if nxt.budget.extend is None:
            goes = services.run_budget_stop(run=goes, user=user)
        else:
            goes = services.run_budget_extend(run=goes, extend=nxt.budget.extend, user=user)
            if nxt.update is not None:  # into the checkpoint it goes on from, as a resume's
                services.run_command_update(run=goes, update=nxt.update)
    elif nxt.way == Way.RESUME:
        if nxt.by_id:
            services.run_resume(run=goes, answers=nxt.answers, user=user, via=nxt.via)
        else:
            (interrupt_id, answer), = nxt.answers.items()
            services.interrupt_answer(interrupt=nxt.questions[interrupt_id], answer=answer,
                                      user=user, via=nxt.via)
        # its update into the checkpoint the run goes on from, once the answers are
        # recorded: a resume that loses the race, or whose answer is refused, writes
        # nothing (the executor takes both once the decision commits)
        if nxt.update is not None:
            services.run_command_update(run=goes, update=nxt.update)
        goes.refresh_from_db()
    else:
        services.run_continue(run=goes, user=user)
    if not stops:  # its tokens stream if this request streams its messages
        services.run_stream_tokens_set(run=goes, stream_tokens=options.stream_tokens)
    # then the request's breakpoints, recorded in the LangGraph run the resume or the
    # continue makes (the executor takes both once this decision commits): on LangGraph's
    # server that is a run of its own, and breakpoints belong to the run that asked for
    # them (so one asked before does not stop it again, unless asked again)
    if goes.state in states.WAITS and (
            list(goes.interrupt_before or ()), list(goes.interrupt_after or ())) != (
            options.interrupt_before, options.interrupt_after):
        services.run_breakpoints_set(run=goes, interrupt_before=options.interrupt_before,
                                     interrupt_after=options.interrupt_after, user=user)
    langgraph_run = goes.current_langgraph_run()
    return Started(langgraph_run, langgraph_run.first_seq - 1)


def _first(run: Run) -> Started:
    """A new ``Run``'s LangGraph run, its stream from its first event."""
    langgraph_run = store.first_langgraph_run(run)
    return Started(langgraph_run, langgraph_run.first_seq - 1)


def _command_applied(thread: Thread, nxt: Next, user: User) -> Started:
    """A command's update alone, its end, or a state update, applied under :func:`locked`
    as :func:`_decide_command` decided it.

    What the thread's lock may hold is written here: a waiting run's update (writes of no
    task on its checkpoint, on the saver's connection as a resume's update is) and, for a
    run paused at a breakpoint, its continue; an end's record, the waiting run cancelled
    (its questions withdrawn), so a request decided after this one sees the run ended (a
    resume is refused as any late resume is). What LangGraph writes on a saver of its own
    (``update_state``: a checkpoint) waits for the commit (:func:`written`): that saver's
    connection is not this transaction's, and inside it (SQLite's one write lock, or the
    run's row a fenced write would share) it would wait for this very transaction."""
    run = nxt.run
    assert run is not None
    if nxt.way == Way.UPDATE:
        services.run_command_update(run=run, update=nxt.update)
        if run.status == Run.Status.PAUSED:  # LangGraph's run would go on with it
            run = services.run_continue(run=run, user=user)
        run.refresh_from_db()
        return Started(run.current_langgraph_run(), run.last_seq)
    if nxt.way == Way.END and run.state in states.WAITS:
        run = services.run_cancel(run=run, user=user, reason=nxt.why)
    return Started(run.current_langgraph_run(), run.last_seq, nxt.edit)


def written(thread: Thread, started: Started, user: User) -> Started:
    """Write the :class:`Edit` a command's (or a state update's) decision left
    (:func:`_command_applied`), once that decision committed: the updates, then the
    ``__end__``, as ``update_state`` writes them, through LangGraph's own saver
    (``services.run_update_state``); what the request answers with (its ``checkpoint``
    the last written). Nothing to write: ``started`` as it is.

    The decision was made and recorded under the lock (an end's waiting run cancelled
    there), so racing requests have decided one after another, each seeing the one before
    it. The write is a transaction of its own: on PostgreSQL under :func:`locked` again,
    holding the thread's row alone while the saver writes (its connection takes no row
    Planwatch locks, and the run's row is locked only after, to record the checkpoint),
    so racing edits write one after another; on SQLite after the decision's commit,
    unlocked (the IMMEDIATE transaction would keep the saver's own connection waiting for
    the database's one write lock it holds). Either way the write is guarded by what the
    run is then: still the thread's latest run, not busy, no executor holding it
    (``run_update_state`` refuses that), its newest checkpoint still the one the edit was
    decided on (:attr:`Edit.seen`), and each write a child of that checkpoint (or of the
    checkpoint a state update names: the branch it asked for), never of another run's. A
    request decided meanwhile that moved the thread on (a new run, with input; a resume of
    the run a state update was decided on; an edit or an end decided beside it and written
    first) refuses the write with a 409 saying so: as LangGraph's server refuses a run on
    a thread with one in flight under ``multitask_strategy: "reject"``, and as Planwatch
    refuses a command on a busy thread whatever the strategy; an edit sent once the one
    before it was written is decided on that one's checkpoint, and written."""
    edit = started.edit
    if edit is None:
        return started
    with edit_held(thread):
        return _write(thread, edit, user)


def edit_held(thread: Thread | None) -> AbstractContextManager[None]:
    """Where an edit decided earlier is written (:func:`written`, :func:`page_edit`): on
    PostgreSQL under :func:`locked` again; on SQLite (or a run of no thread) unlocked, since
    the IMMEDIATE transaction would keep the saver's own connection waiting for the
    database's one write lock it holds."""
    if thread is None or connection.vendor == "sqlite":
        return nullcontext()
    return locked(thread)


def _write(thread: Thread, edit: Edit, user: User) -> Started:
    """:func:`written`'s guard and writes."""
    run = edit.run
    latest = thread.latest_run()
    what = ("its update and end" if edit.ends and edit.updates else "its end" if edit.ends
            else "its update")
    if latest is None or latest.pk != run.pk or latest.is_busy() or thread.has_queue():
        moved = f"run {latest.id} ({latest.status})" if latest is not None else "no run"
        raise RunStateError(
            f"thread {thread.id} moved on before {what} was written (its latest run is "
            f"{moved}); nothing was written: send it again once the thread is idle")
    newest = run.last_root_checkpoint()
    if newest != edit.seen:  # a request decided beside it wrote first
        raise RunStateError(
            f"thread {thread.id} moved on before {what} was written: it was decided on "
            f"checkpoint {edit.seen or '(none)'}, and a request decided beside it has "
            f"written {newest} since; nothing was written: read the state again, then "
            "send it again if it still applies")
    base = edit.checkpoint or newest
    for update in edit.updates:  # each as its node would write it, on the one before
        base = services.run_update_state(run=run, values=update, as_node=edit.as_node,
                                         user=user, checkpoint_id=base)
    if edit.ends:
        base = services.run_update_state(run=run, values=None, as_node=END, user=user,
                                         checkpoint_id=base)
    run.refresh_from_db()
    return Started(run.current_langgraph_run(), run.last_seq, checkpoint=base)


def _decide(thread: Thread, req: RunRequest, current: Run | None) -> Next:
    """What ``req`` does to ``thread``, whose latest run is ``current`` (nothing written:
    a refused request raises here)."""
    if req.multitask_strategy not in STRATEGIES:
        raise RunInputError(f"multitask_strategy {req.multitask_strategy!r} is not one of "
                            f"{', '.join(STRATEGIES)}",
                            errors={"multitask_strategy": "unknown strategy"})
    if current is not None and current.graph != req.assistant_id:
        raise RunInputError(
            f"thread {thread.id} runs graph {current.graph!r}, not {req.assistant_id!r}; "
            "use a new thread for another graph", errors={"assistant_id": "another graph"})
    if req.command is not None:
        return _decide_command(thread, current, req.command, req.checkpoint_id)
    if current is None:
        if req.checkpoint_id:
            raise RunInputError(f"thread {thread.id} has no runs, so no checkpoint "
                                f"{req.checkpoint_id!r}", errors={"checkpoint_id": "no runs"})
        return Next(Way.CREATE)
    base: Run | None = current
    checkpoint = ""
    if req.checkpoint_id:
        base, checkpoint = holder_of(thread, req.checkpoint_id), req.checkpoint_id
    cancel: tuple[Run, ...] = ()
    if current.is_busy() or thread.has_queue():
        if req.multitask_strategy == "enqueue" and not req.checkpoint_id:
            return Next(Way.ENQUEUE, run=_last_queued(current))
        cancel, base, checkpoint = _make_room(thread, current, req.multitask_strategy, base,
                                              checkpoint)
    elif current.allows(states.CONTINUE) and req.input is None and not checkpoint:
        return Next(Way.CONTINUE, run=current)
    elif current.state in states.WAITS:
        cancel = (current,)  # the thread moves on without answering
    if base is not None and not checkpoint:
        checkpoint = base.last_root_checkpoint()
    if base is None or not checkpoint:  # nothing to go on from: a fresh run
        return Next(Way.CREATE, cancel=cancel)
    return Next(Way.FORK, cancel=cancel, run=base, checkpoint=checkpoint)


def _decide_command(thread: Thread, current: Run | None, command: Command,
                    checkpoint_id: str = "") -> Next:
    """What ``command`` does to ``thread`` (latest run ``current``), as LangGraph's server
    runs a command (its update first, then the graph goes on from where it stands):

    - a resume answers the waiting run (:func:`_resume`), its update written beside;
    - an update alone: a run waiting for an answer takes it and keeps waiting (LangGraph's
      graph would ask the same question again), a run at a breakpoint takes it and
      continues, and an ended run's thread gets it as a state update (nothing is left to
      run: LangGraph's run would end at once);
    - goto ``'__end__'``: the run ends where it stands (Agent Chat UI's "Mark as
      Resolved"), its update written first, then ``update_state`` as ``__end__``;
    - a state update (``update_state``, at ``checkpoint_id`` if given): its updates
      written as its node, on a thread no run is busy on, as an update alone on an ended
      thread is; as ``__end__`` on a waiting run (Agent Inbox's "resolve") the run ends,
      as goto ``'__end__'`` ends it.

    Every update is checked against the graph's state schema here, before anything is
    recorded (a 422 naming the channel). Nothing is written."""
    if command.kind == CommandKind.RESUME:
        pause = budgets.pause_of(current) if current is not None else None
        nxt = _budget_resume(current, pause, command) if current is not None and pause \
            else _resume(thread, current, command.resume)
        if command.update is not None and current is not None:
            services.run_state_edit_check(run=current, values=command.update, as_node="")
        return replace(nxt, update=command.update)
    state = command.kind == CommandKind.STATE
    ends = command.kind == CommandKind.END or (state and command.as_node == END)
    if current is None:
        raise RunStateError(f"thread {thread.id} has no run to end; start one first" if ends
                            else f"thread {thread.id} has no state to update yet; start a "
                            "run with input first")
    if current.is_busy() or (not ends and thread.has_queue()):
        then = "cancel it to end it" if ends else (
            "wait for it (runs.join) or cancel it, then send the update")
        raise ThreadBusy(f"thread {thread.id} is busy with run {current.id} "
                         f"({current.status}); {then}")
    if state:
        if checkpoint_id:  # any checkpoint of the thread: the update branches from it
            holder_of(thread, checkpoint_id)
        for update in command.updates:  # all checked before any is written
            services.run_state_edit_check(run=current, values=update, as_node=command.as_node)
        edit = Edit(current, current.last_root_checkpoint(), updates=command.updates,
                    as_node=command.as_node, checkpoint=checkpoint_id)
        if not ends:
            return Next(Way.EDIT, run=current, edit=edit)
        return Next(Way.END, run=current, edit=edit, why=(
            f"thread {thread.id} was ended with update_state(as_node='__end__') by a "
            "LangGraph client; the question was withdrawn unanswered"))
    updates = () if command.update is None else (command.update,)
    if command.update is not None:
        services.run_state_edit_check(run=current, values=command.update, as_node="")
    if ends:
        services.run_state_edit_check(run=current, values=None, as_node=END)
        return Next(Way.END, run=current, edit=Edit(
            current, current.last_root_checkpoint(), updates=updates, ends=True),
                    why=(f"thread {thread.id} was ended with Command(goto='__end__') by a "
                         "LangGraph client; the question was withdrawn unanswered"))
    if current.status in (Run.Status.INTERRUPTED, Run.Status.PAUSED):
        return Next(Way.UPDATE, run=current, update=command.update)
    return Next(Way.EDIT, run=current,
                edit=Edit(current, current.last_root_checkpoint(), updates=updates))


def _last_queued(current: Run) -> Run:
    """The run a new enqueued run waits for: the last one already queued behind
    ``current``, or ``current`` itself (so several enqueued runs go one after another)."""
    run = current
    while (nxt := Run.objects.waiting_turn().filter(waits_for=run)
           .order_by("-created_at").first()) is not None:
        run = nxt
    return run


def _make_room(thread: Thread, current: Run, strategy: str, base: Run | None,
               checkpoint: str) -> tuple[tuple[Run, ...], Run | None, str]:
    """The strategy on a busy thread: the runs to cancel (the busy one and every one in
    flight, as LangGraph's server), and the run and checkpoint the new run starts from
    (no run: start afresh)."""
    if strategy == "reject":
        raise ThreadBusy(
            f"thread {thread.id} is busy with run {current.id} ({current.status}); wait for "
            "it (runs.join), cancel it, or send multitask_strategy 'interrupt' or 'rollback'")
    cancel = (current, *thread.runs.waiting_turn())
    if checkpoint:
        return cancel, base, checkpoint
    if strategy == "rollback":  # from where the busy run started
        return cancel, current.parent, current.forked_from_checkpoint
    return cancel, current, ""  # interrupt: from the busy run's last checkpoint


def _resume(thread: Thread, current: Run | None, value: Any) -> Next:
    """How the thread's interrupted run is answered with ``value`` (or a map by interrupt
    id): the answers as its questions take them, or the question a review declines."""
    # a LangGraph resume answers a run that waits on its questions (not one running on,
    # nor one whose questions a request before this one answered)
    pending = {i.interrupt_id: i for i in current.interrupts.filter(
        status=Interrupt.Status.PENDING)} if current is not None else {}
    if current is None or current.state not in states.WAITS or not current.allows(
            states.ANSWER) or not pending:
        state = ("empty" if current is None else "answered already"
                 if current.status == Run.Status.INTERRUPTED else current.status)
        raise RunStateError(f"thread {thread.id} is {state}, not waiting for an answer; "
                            "resume only an interrupted thread")
    by_id = isinstance(value, dict) and bool(value) and set(value) <= set(pending)
    if not by_id and len(pending) != 1:
        raise RunInputError(
            f"run {current.id} waits on {len(pending)} questions "
            f"({', '.join(sorted(pending))}); resume with a map {{interrupt_id: answer}}",
            errors={"command": "ambiguous resume"})
    answers = dict(value) if by_id else {next(iter(pending)): value}
    via = Interrupt.Channel.LANGGRAPH
    if current.spec.review_questions:
        for interrupt_id, raw in answers.items():
            question = pending[interrupt_id].payload
            review = review_of(raw, question if isinstance(question, dict) else None)
            if review is not None:
                via = Interrupt.Channel.AGENT_INBOX
            if review is not None and review.declined:
                return Next(Way.RESUME, run=current, declined=pending[interrupt_id],
                            why=_declined(pending[interrupt_id], review.note))
            if review is not None:
                answers[interrupt_id] = review.answer
    return Next(Way.RESUME, run=current, answers=answers, questions=pending, by_id=by_id,
                via=via)


def _budget_resume(current: Run, pause: budgets.BudgetPause, command: Command) -> Next:
    """How the thread's run paused at its budget is answered with ``command.resume``: the
    budget extended or the run stopped (a stop takes no update: nothing goes on to take it)."""
    answer = budget_reviews.answer_of(command.resume, run_id=current.id, pause=pause)
    if answer.stops and command.update is not None:
        raise RunInputError("command.update: a resume that stops the run at its budget takes "
                            "no update; send the update with an extension, or stop alone",
                            errors={"command.update": "not with a stop"})
    return Next(Way.BUDGET, run=current, budget=answer)


def _declined(question: Interrupt, note: str) -> str:
    """Why a run stopped when its question was declined (an inbox's ignore, a chat
    client's reject): the planners have no answer meaning "skip", so the run ends here."""
    field = question.payload.get("field") if isinstance(question.payload, dict) else None
    said = f": {note}" if note else ""
    return (f"question {field or question.interrupt_id!r} was declined from a LangGraph "
            f"client (ignore / reject){said}; the run stopped unanswered")

