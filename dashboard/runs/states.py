"""A run's state machine: one field, ``Run.state``, and the one table that moves it.

As procrastinate keeps a job's status (one enum, one place that moves it), a run's state
is one column whose values are :class:`State`, and every change of it is a
:class:`Transition` declared below, applied by :func:`move` (which refuses a transition
the table does not declare from the run's state). Everything said of a state is read from
:data:`MEANINGS`, here and nowhere else:

- the status people and Planwatch's APIs see (``Run.status``, a column the database
  generates from the state: an answer or a continue waiting for an executor is still
  "interrupted" or "paused" to them);
- whether a run is active (an executor holds it or is to take it), busy (active, or about
  to resume), finished, or waits for an operator;
- the status its LangGraph thread takes, and its LangGraph run status;
- the status replay shows after each event (:data:`STATUS_AFTER`).

The preconditions of the services (:func:`allows`) and the claim's SQL
(``dashboard.runs.store``) read the transitions' ``moves``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from django.db import models


class State(models.TextChoices):
    """Where a run stands; the only field any transition writes."""

    QUEUED = "queued", "Queued"  # created, waiting for an executor slot
    RUNNING = "running", "Running"  # claimed by an executor that heartbeats
    INTERRUPTED = "interrupted", "Waiting for you"  # waits for an operator's answer
    # answered (or answered while it ran on), no executor took the answer up yet
    RESUMING = "resuming", "Resuming"
    PAUSED = "paused", "Paused"  # stopped at a breakpoint, waits for continue or step
    CONTINUING = "continuing", "Continuing"  # continued, no executor took it up yet
    SUCCEEDED = "succeeded", "Succeeded"  # the graph reached END
    FAILED = "failed", "Failed"  # a node raised, or the executor gave up
    CANCELLED = "cancelled", "Cancelled"  # stopped by an operator


class Status(models.TextChoices):
    """A run's status as people and Planwatch's APIs see it (``Run.status``)."""

    QUEUED = "queued", "Queued"  # created, waiting for an executor slot
    RUNNING = "running", "Running"  # claimed by an executor that heartbeats
    # waiting for an operator's answer; operators read it in plain words (the API keeps
    # the value, which LangGraph's clients know)
    INTERRUPTED = "interrupted", "Waiting for you"
    PAUSED = "paused", "Paused"  # stopped at a breakpoint, waiting for continue or step
    SUCCEEDED = "succeeded", "Succeeded"  # the graph reached END
    FAILED = "failed", "Failed"  # a node raised, or the executor gave up
    CANCELLED = "cancelled", "Cancelled"  # stopped by an operator


class ThreadStatus(models.TextChoices):
    """A LangGraph thread's status: its latest run's state, as :data:`MEANINGS` maps it."""

    IDLE = "idle", "Idle"  # no run, or its latest run succeeded or was cancelled
    BUSY = "busy", "Busy"  # a run executes, waits to, or is about to resume
    INTERRUPTED = "interrupted", "Interrupted"  # waits for an answer or a continue
    ERROR = "error", "Error"  # its latest run failed


@dataclass(frozen=True)
class Meaning:
    """What a state says, to each reader of it."""

    status: Status
    """The status people and Planwatch's APIs see."""
    thread: ThreadStatus
    """The status the run's LangGraph thread takes while it is the thread's latest run."""
    langgraph: str
    """Its status as LangGraph's server names run statuses."""
    active: bool = False
    """An executor holds the run, or is to take it."""
    busy: bool = False
    """Active, or about to resume: it may not be deleted, and its thread is busy."""
    waits: bool = False
    """It waits for an operator (an answer or a continue), or was just given one."""
    finished: bool = False
    """It reached a final state."""


MEANINGS: dict[State, Meaning] = {
    State.QUEUED: Meaning(Status.QUEUED, ThreadStatus.BUSY, "pending", active=True, busy=True),
    State.RUNNING: Meaning(Status.RUNNING, ThreadStatus.BUSY, "running", active=True,
                           busy=True),
    State.INTERRUPTED: Meaning(Status.INTERRUPTED, ThreadStatus.INTERRUPTED, "interrupted",
                               waits=True),
    State.RESUMING: Meaning(Status.INTERRUPTED, ThreadStatus.BUSY, "pending", busy=True,
                            waits=True),
    State.PAUSED: Meaning(Status.PAUSED, ThreadStatus.INTERRUPTED, "interrupted", waits=True),
    State.CONTINUING: Meaning(Status.PAUSED, ThreadStatus.BUSY, "pending", busy=True,
                              waits=True),
    State.SUCCEEDED: Meaning(Status.SUCCEEDED, ThreadStatus.IDLE, "success", finished=True),
    State.FAILED: Meaning(Status.FAILED, ThreadStatus.ERROR, "error", finished=True),
    # LangGraph's server calls a cancelled run "interrupted"
    State.CANCELLED: Meaning(Status.CANCELLED, ThreadStatus.IDLE, "interrupted",
                             finished=True),
}


def states(**flags: bool) -> tuple[State, ...]:
    """The states whose meaning has every one of ``flags`` (``states(busy=True)``)."""
    return tuple(s for s, m in MEANINGS.items()
                 if all(getattr(m, name) is value for name, value in flags.items()))


def meaning(state: str) -> Meaning:
    """What ``state`` (a :class:`State` value) says."""
    return MEANINGS[State(state)]


def status_of(state: str) -> Status:
    """The status people and the APIs see for ``state``."""
    return meaning(state).status


def showing(status: str) -> tuple[State, ...]:
    """The states people and the APIs see as ``status`` (a filter by status)."""
    return tuple(s for s, m in MEANINGS.items() if m.status == status)


ACTIVE = states(active=True)
BUSY = states(busy=True)
WAITS = states(waits=True)
FINISHED = states(finished=True)
UNFINISHED = states(finished=False)
LANGGRAPH_STATUSES = ("pending", "running", "error", "success", "timeout", "interrupted")
"""LangGraph's run statuses, in its order ("timeout": never, here)."""

SUPERSEDED_LANGGRAPH_STATUS = "interrupted"
"""The LangGraph status of a LangGraph run after which another of its ``Run`` went on (a
resume, a continue): it stopped at a question or a breakpoint, and LangGraph's servers
leave such a run ``interrupted`` when the next run request resumes the thread (Aegra's
``run_executor``: ``"interrupted" if final_output.has_interrupt``)."""


def langgraph_status(state: str, *, superseded: bool) -> str:
    """The LangGraph status of a LangGraph run of a ``Run`` in ``state``: the ``Run``'s
    while it is the latest, :data:`SUPERSEDED_LANGGRAPH_STATUS` once another went on after it."""
    return SUPERSEDED_LANGGRAPH_STATUS if superseded else meaning(state).langgraph


def langgraph_states(status: str) -> tuple[State, ...]:
    """The states of a ``Run`` whose latest LangGraph run has LangGraph status ``status``."""
    return tuple(s for s, m in MEANINGS.items() if m.langgraph == status)


def goes_on(before: str, after: str) -> bool:
    """Whether a ``Run`` moving from ``before`` to ``after`` goes on after it had stopped
    for an operator (answered, or continued past a breakpoint): one more LangGraph run of
    it, as LangGraph's server makes a run of each resume."""
    was, becomes = meaning(before), meaning(after)
    return was.waits and not was.busy and becomes.busy


# -- transitions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Transition:
    """A declared change of state: from each state in ``moves`` to its value there (to
    one of its values, named by who applies it, where the value is a tuple: an undo)."""

    name: str
    moves: Mapping[State, State | tuple[State, ...]]
    events: tuple[str, ...] = ()
    """The kinds of the events that record it in the run's log (replay reads them)."""

    def __str__(self) -> str:
        return self.name


def _stay(*among: State) -> dict[State, State]:
    """A transition that keeps the state (a request a run takes in these states)."""
    return {s: s for s in among}


S = State
START = Transition("start", {S.QUEUED: S.RUNNING}, ("run_started", "run_forked"))
"""An executor takes a queued run (started, forked or enqueued)."""
RESUME = Transition("resume", {S.RESUMING: S.RUNNING}, ("run_resumed",))
"""An executor takes up the answers a run was given."""
GO_ON = Transition("go_on", {S.CONTINUING: S.RUNNING}, ("run_resumed",))
"""An executor takes up a continue (or a step) a paused run was given."""
RECOVER = Transition("recover", {S.RUNNING: S.RUNNING}, ("run_recovered",))
"""An executor takes a run whose executor died (its heartbeat is stale)."""
ASK = Transition("ask", {S.RUNNING: S.INTERRUPTED}, ("interrupt_raised",))
"""The graph waits for an operator's answer."""
HALT = Transition("halt", {S.RUNNING: S.PAUSED}, ("run_paused",))
"""The graph stopped at a breakpoint (or after a step)."""
SUCCEED = Transition("succeed", {S.RUNNING: S.SUCCEEDED}, ("run_succeeded",))
FAIL = Transition("fail", {S.RUNNING: S.FAILED}, ("run_failed",))
CANCEL = Transition("cancel", {s: S.CANCELLED for s in UNFINISHED}, ("run_cancelled",))
"""The run ends cancelled: by its executor, or at once by an operator if none holds it."""
ANSWER = Transition("answer", {S.INTERRUPTED: S.RESUMING, S.RESUMING: S.RESUMING,
                               S.RUNNING: S.RUNNING})
"""An operator answers one of its questions (while it runs on: it takes it up when it
next asks)."""
CONTINUE = Transition("continue", {S.PAUSED: S.CONTINUING, S.CONTINUING: S.CONTINUING},
                      ("run_continued",))
"""An operator continues (or steps) a run paused at a breakpoint (again: one more event)."""
REQUEST_CANCEL = Transition("request_cancel", _stay(*UNFINISHED))
"""An operator asks the executor that holds the run to cancel it."""
SET_BREAKPOINTS = Transition("set_breakpoints", _stay(*UNFINISHED), ("breakpoints_changed",))
"""An operator changes where the run pauses."""
EDIT_STATE = Transition("edit_state", _stay(*states(active=False)))
"""An operator writes into the run's graph state (no executor holds it)."""
DELETE = Transition("delete", _stay(*states(busy=False)))
"""An operator deletes the run (nothing executes it or is about to)."""
WAITED = (S.INTERRUPTED, S.PAUSED)
"""Where a run waits for an operator: the states a LangGraph run that goes on leaves."""
ROLL_BACK = Transition("roll_back", {s: WAITED for s in states(busy=False)})
"""A LangGraph run of the run that went on after it waited (a resume, a continue) is
rolled back once the run stopped (LangGraph's ``cancel?action=rollback``): the run waits
again where that LangGraph run found it, for an answer or at its breakpoint (the
LangGraph run's ``went_on_from``); its events, checkpoints and taken answers go."""

TRANSITIONS = (START, RESUME, GO_ON, RECOVER, ASK, HALT, SUCCEED, FAIL, CANCEL, ANSWER,
               CONTINUE, REQUEST_CANCEL, SET_BREAKPOINTS, EDIT_STATE, DELETE, ROLL_BACK)
"""Every transition: a change of state not declared here is refused (:func:`move`)."""

ENDS = {S.SUCCEEDED: SUCCEED, S.FAILED: FAIL, S.CANCELLED: CANCEL}
"""The transition that ends an execution in each final state."""
STOPS = {S.INTERRUPTED: ASK, S.PAUSED: HALT, **ENDS}
"""The transition that leaves an execution in each state it may stop in."""


class Refused(ValueError):
    """A transition the table does not declare from the run's state."""

    def __init__(self, state: str, transition: Transition, *, to: str = "") -> None:
        allowed = ", ".join(transition.moves) or "no state"
        where = f" to {to}" if to else ""
        super().__init__(f"a run {state} cannot {transition.name}{where}; only one {allowed} "
                         "can, to a state the table declares")
        self.state, self.transition = state, transition


def allows(state: str, transition: Transition) -> bool:
    """Whether ``transition`` is declared from ``state``."""
    return state in transition.moves


def targets(transition: Transition, state: str) -> tuple[State, ...]:
    """The states ``transition`` may take a run in ``state`` to: one, but for an undo (none
    if it is undeclared there)."""
    target = transition.moves.get(State(state), ())
    return target if isinstance(target, tuple) else (target,)


def move(state: str, transition: Transition, *, to: str = "") -> State:
    """The state ``transition`` takes a run in ``state`` to (``to``, one of those it
    declares, for an undo); :class:`Refused` if undeclared."""
    try:
        target = transition.moves[State(state)]
        if isinstance(target, tuple):
            if State(to) in target:
                return State(to)
        elif to in ("", target):
            return target
    except (KeyError, ValueError):
        pass
    raise Refused(state, transition, to=to)


def _ends(transition: Transition) -> set[State]:
    """Every state ``transition`` may take a run to."""
    return {to for state in transition.moves for to in targets(transition, state)}


STATUS_AFTER: dict[str, Status] = {
    kind: MEANINGS[next(iter(_ends(t)))].status
    for t in TRANSITIONS if len(_ends(t)) == 1 for kind in t.events
}
"""The status a run shows right after an event of this kind (replay folds them)."""
