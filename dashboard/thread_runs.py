"""What a run request does to a thread, through the run service: the LangGraph API's
run requests (``lgserver``) and the crons' runs (``crons``) both decide here.

A thread's next run is decided here, and only here (:func:`_decide`, writing nothing, then
:func:`_next_run` applies the decision):

- no run yet: a new run with the input (``services.run_create``);
- ``command={"update": …}`` (:func:`command_update`) is applied before the rest (beside a
  resume, under the lock, by the request that answers);
- ``command={"resume": …}``: the thread's interrupted run is answered (one answer, or a
  map by interrupt id) and goes on; the LangGraph run is that same run, with the request's
  breakpoints; a graph that declares ``review_questions`` takes the standard decisions
  (``planner.questions.review_of``): an answer, or a declined question, which stops the run;
- ``input=None`` on a run paused at a breakpoint: it continues (``services.run_continue``);
- otherwise (new input on an ended run, or ``checkpoint_id``): a fork of the run holding
  the checkpoint, from there, with the input (``services.run_fork``);
- the thread is busy: ``multitask_strategy`` decides — ``reject`` (409), ``interrupt``
  (the busy run is cancelled, the new one starts from its last checkpoint), ``rollback``
  (cancelled, and the new one starts from where the busy run started) or ``enqueue`` (the
  new run waits, queued, until the busy one stops, then goes on from its last checkpoint).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from langgraph.constants import END

from dashboard import services
from dashboard.models import Interrupt, LangGraphRun, Run, RunEvent, Thread
from dashboard.runs import states, store
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


@dataclass
class RunRequest:
    """The parts of a LangGraph run request that decide what happens."""

    assistant_id: str
    input: Any = None
    command: dict[str, Any] | None = None
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
    CONTINUE = "continue"  # its run paused at a breakpoint goes on
    CREATE = "create"  # a new run from nothing (no run yet, or nothing to go on from)
    ENQUEUE = "enqueue"  # a new run waits behind the busy one
    FORK = "fork"  # a new run from a checkpoint of one of its runs


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
    why: str = ""


@contextmanager
def locked(thread: Thread) -> Iterator[None]:
    """Hold the thread's row for the decision about its next run, until it is committed.

    A conditional UPDATE takes the row's lock on PostgreSQL; on SQLite the IMMEDIATE
    transaction already holds the database's one write lock, and every statement inside
    it keeps every other writer (the executor's checkpoints and events) waiting, so it
    adds none. Concurrent run requests on one thread decide one after another, each
    seeing what the one before it did. What may execute is the constraint
    ``run_one_running_per_thread``'s to guarantee; this keeps the requests' answers and
    queues consistent.
    """
    with transaction.atomic():
        if connection.vendor != "sqlite":
            Thread.objects.filter(pk=thread.pk).update(updated_at=timezone.now())
        yield


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


def start(thread: Thread, req: RunRequest, user: User, current: Run | None) -> LangGraphRun:
    """Start (or resume, or continue) the thread's next run after ``current`` (its
    :meth:`~dashboard.models.Thread.latest_run`); returns the LangGraph run the request
    made (its ``run`` is the ``Run`` that goes on): a new ``Run``'s first, or the one a
    resume or a continue of ``current`` made (``store.apply``, as any answer or continue
    does), read in the caller's transaction (:func:`locked`); a new ``Run``'s as it was
    written, not read back."""
    return _next_run(thread, req, user, current)


def _next_run(thread: Thread, req: RunRequest, user: User, current: Run | None
              ) -> LangGraphRun:
    """The LangGraph run of the ``Run`` that goes on for :func:`start`: decided
    (:func:`_decide`), then done, here and only here."""
    nxt = _decide(thread, req, current)
    for run in nxt.cancel:
        services.run_cancel(run=run, user=user)
    options = req.run_options()
    if nxt.way == Way.CREATE:
        return store.first_langgraph_run(services.run_create(
            graph=req.assistant_id, input=req.input or {}, user=user, thread=thread,
            options=options))
    assert nxt.run is not None
    if nxt.way == Way.ENQUEUE:
        return store.first_langgraph_run(services.run_enqueue(
            after=nxt.run, input=req.input, user=user, thread=thread, options=options))
    if nxt.way == Way.FORK:
        return store.first_langgraph_run(services.run_fork(
            run=nxt.run, checkpoint_id=nxt.checkpoint, user=user, thread=thread,
            input=req.input if req.input is not None else services.NO_INPUT,
            options=options))
    goes = nxt.run
    if nxt.declined is not None:
        # declining ends the run: only one who may answer the question may decline it
        if reason := services.interrupt_may_answer(interrupt=nxt.declined, user=user):
            raise services.AnswerForbidden(reason)
        goes = services.run_cancel(run=goes, user=user, reason=nxt.why)
    elif nxt.way == Way.RESUME:
        if nxt.by_id:
            services.run_resume(run=goes, answers=nxt.answers, user=user, via=nxt.via)
        else:
            (interrupt_id, answer), = nxt.answers.items()
            services.interrupt_answer(interrupt=nxt.questions[interrupt_id], answer=answer,
                                      user=user, via=nxt.via)
        _command_update_of(req, goes)
        goes.refresh_from_db()
    else:
        services.run_continue(run=goes, user=user)
    if nxt.declined is None:  # its tokens stream if this request streams its messages
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
    return goes.current_langgraph_run()


def _command_update_of(req: RunRequest, run: Run) -> None:
    """Write a resume's ``Command(update=…)`` into ``run``'s checkpoint once the request's
    answers are recorded, under :func:`locked`: a resume that loses a race, or whose answer
    is refused, writes nothing (the executor takes both once the decision commits)."""
    if (update := (req.command or {}).get("update")) is not None:
        services.run_command_update(run=run, update=update)


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
    command = req.command or {}
    if set(command) - {"resume", "update"}:
        raise Unsupported(f"command {sorted(set(command) - {'resume', 'update'})} is not "
                          "served here; a run request takes Command(resume=…, update=…), or "
                          "goto '__end__' (thread_runs.end)",
                          errors={"command": "only resume and update"})
    if command and "resume" not in command:
        raise RunInputError("the command has nothing to do: give it a resume, an update or "
                            "goto '__end__'", errors={"command": "empty command"})
    if "resume" in command:  # its update, if any, is written as it is answered
        return _resume(thread, current, command["resume"])
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


def command_update(thread: Thread, command: dict[str, Any], user: User) -> Run | None:
    """``Command(update=…)``, with or without a resume. LangGraph's server runs the graph
    with the command: the update is applied first, then the graph goes on from where it
    stands. So here, before the run request is decided: beside a resume, the update is only
    checked (None is returned; :func:`start` writes it under :func:`locked` as it answers
    the run, so a racing resume that loses writes nothing); alone, a run waiting
    for an answer takes it and keeps waiting (LangGraph's graph would ask the same question
    again), a run at a breakpoint takes it and continues, and an ended run's thread gets
    it as a state update (nothing is left to run: LangGraph's run would end at once); that
    run is returned. Called outside :func:`locked` (the checkpoints are written on a saver
    of their own)."""
    update = command["update"]
    current = thread.latest_run()
    if current is None:
        raise RunStateError(f"thread {thread.id} has no state to update yet; start a run "
                            "with input first")
    if "resume" in command:
        if current.status != Run.Status.INTERRUPTED or current.is_busy():
            state = "answered already" if current.is_busy() else current.status
            raise RunStateError(f"thread {thread.id} is {state}, not waiting for an "
                                "answer; resume only an interrupted thread")
        services.run_state_edit_check(run=current, values=update, as_node="")
        return None
    if current.is_busy() or thread.has_queue():
        raise ThreadBusy(f"thread {thread.id} is busy with run {current.id} "
                         f"({current.status}); wait for it (runs.join) or cancel it, then "
                         "send the update")
    if current.status == Run.Status.INTERRUPTED:
        services.run_command_update(run=current, update=update)
        return current
    if current.status == Run.Status.PAUSED:
        services.run_command_update(run=current, update=update)
        return services.run_continue(run=current, user=user)
    update_state(thread, current, values=update, as_node="", user=user, checkpoint_id="")
    current.refresh_from_db()
    return current


def _resume(thread: Thread, current: Run | None, value: Any) -> Next:
    """How the thread's interrupted run is answered with ``value`` (or a map by interrupt
    id): the answers as its questions take them, or the question a review declines."""
    # a LangGraph resume answers a run that waits on its questions (not one running on,
    # nor one whose questions a request before this one answered)
    pending = {i.interrupt_id: i for i in current.interrupts.filter(
        status=Interrupt.Status.PENDING)} if current is not None else {}
    if current is None or current.state not in states.WAITS or not current.allows(
            states.ANSWER) or not pending:
        state = ("answered already" if current is not None and not pending
                 else current.status if current else "empty")
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


def ends(command: dict[str, Any] | None) -> bool:
    """Whether a run request's command is for :func:`end` (it names a goto)."""
    return command is not None and "goto" in command


def end(thread: Thread, command: dict[str, Any], user: User) -> Run:
    """``Command(goto="__end__", update=…)``: the thread's run ends where it stands (Agent
    Chat UI's "Mark as Resolved"), its update written first (as POST /threads/<id>/state
    writes one), then :func:`update_state` as ``__end__``; the run. Any other goto, an
    update without one, or with a resume, is refused naming the way out. Called outside
    :func:`locked` (LangGraph writes the checkpoints on a saver of its own)."""
    current = thread.latest_run()
    goto = command.get("goto")
    if goto != END or "resume" in command:
        raise Unsupported(
            f"command {command!r} is not served: Planwatch takes goto '__end__' (with an "
            "optional update, and no resume) to end a thread's run; answer with "
            "Command(resume=…) alone, and edit state with POST /threads/<id>/state",
            errors={"command": "only goto '__end__'"})
    if current is None:
        raise RunStateError(f"thread {thread.id} has no run to end; start one first")
    if current.is_busy():
        raise ThreadBusy(f"thread {thread.id} is busy with run {current.id} "
                         f"({current.status}); cancel it to end it")
    if command.get("update") is not None:  # written as a node would, then the end
        update_state(thread, current, values=command["update"], as_node="", user=user,
                     checkpoint_id="")
    update_state(thread, current, values=None, as_node=END, user=user, checkpoint_id="")
    current.refresh_from_db()
    return current


def _declined(question: Interrupt, note: str) -> str:
    """Why a run stopped when its question was declined (an inbox's ignore, a chat
    client's reject): the planners have no answer meaning "skip", so the run ends here."""
    field = question.payload.get("field") if isinstance(question.payload, dict) else None
    said = f": {note}" if note else ""
    return (f"question {field or question.interrupt_id!r} was declined from a LangGraph "
            f"client (ignore / reject){said}; the run stopped unanswered")


def update_state(thread: Thread, latest: Run, *, values: Any, as_node: str, user: User,
                 checkpoint_id: str) -> str:
    """Write ``values`` into the thread's state as ``as_node`` (LangGraph's update_state);
    the new checkpoint's id. As ``__end__`` on a run waiting for an answer or at a
    breakpoint (Agent Inbox's "mark as resolved"), the graph ends there and the run stops:
    its question is withdrawn and the run is cancelled, saying why."""
    new_id = services.run_update_state(run=latest, values=values, as_node=as_node, user=user,
                                       checkpoint_id=checkpoint_id)
    latest.refresh_from_db()
    if as_node == END and latest.state in states.WAITS:
        services.run_cancel(run=latest, user=user, reason=(
            f"thread {thread.id} was ended with update_state(as_node='__end__') by a "
            "LangGraph client; the question was withdrawn unanswered"))
    return new_id
