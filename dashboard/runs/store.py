"""The run store: every transition of a run, decided and written in one place.

A transition (claim, heartbeat, progress, pause, halt, finish, an answer, a continue, a
cancel or step request, new breakpoints) is a function below that returns the *fields* a
run takes: a plain dict of column values, its new state moved by the table of
:mod:`dashboard.runs.states`. This module is also the only code that writes a run, its
event log and its thread's status; it applies those fields, adding none of its own.

Each write of an execution (events, progress, a claim, a stop, a thread's status) is *one
statement text* below (:class:`Statements`), run on either of two connections (the
contract test, ``tests/dashboard/runs/test_transitions.py``, runs the transitions through
both and compares the rows):

- **Django's** (:func:`create_run`, :func:`apply`, :func:`append_event`,
  :func:`set_thread_status`, and the executor's slower paths: a resume's or a recovery's
  claim, a paused run's questions), inside the services' transactions; an operator's
  request (an answer, a continue, a cancel request, breakpoints), which no execution
  writes, is an ORM update there;
- **the executor's fast path** (:class:`RunStore`): run on the executor's own
  loop with no thread hop. On PostgreSQL each write is *one statement* (data-modifying
  CTEs) in autocommit on a small psycopg pool of the store's own, with prepared
  statements; on SQLite one transaction on the *checkpointer's own* aiosqlite connection,
  under its lock, so the graph's checkpoint writes and the event writes never contend for
  SQLite's single write lock (whose busy handler sleeps for milliseconds).

A run's events and its ``last_seq`` are always written in one statement or transaction, so
the next seq is ``last_seq + 1`` (:func:`next_seq`): the ORM
path numbers an event in :func:`append_event`, the executor in its run's
:class:`~dashboard.runs.execution.EventWriter`, which alone writes the run while it holds it.

Event rows travel as *one* JSON parameter, whatever their number and however many runs
they belong to: the statement's text never changes, so the driver and the server parse
and plan it once, and serialising a write is one ``dumps`` (orjson's, through
:mod:`~dashboard.runs.jsonsafe`). Values are converted by Django's own fields
(``get_db_prep_save``, and a returned row by their converters), so both paths store and
read exactly what the ORM would (SQLite's text datetimes and hex UUIDs included).

On PostgreSQL the store's sessions commit with ``synchronous_commit = off`` unless
``PLANWATCH["SYNC_EVENT_COMMITS"]`` is set: the checkpoints (the graph's truth) are still
committed durably by the saver, so a crash of the *database server* can lose at most the
last few hundred milliseconds of event rows, never a checkpoint, and the run is recovered
from its checkpoint. A crash of Planwatch itself loses nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import logging
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any, Literal, overload

from django.db import IntegrityError, connection, connections, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from dashboard.checkpoints import checkpoints_delete, langgraph_run_undo
from dashboard.models import Interrupt, InterruptGroup, LangGraphRun, Run, RunEvent, Thread
from dashboard.runs import instruments, jsonsafe, states
from dashboard.runs.conf import planwatch_setting
from dashboard.runs.doorbells import SUMMARY_FIELDS
from dashboard.runs.orm import database_sync_to_async, relax_commit, relaxed_commits
from dashboard.runs.outcome import meaning as outcome_meaning
from dashboard.runs.outcome import outcome_decide
from dashboard.runs.savers import (
    Fence,
    RunLost,
    SaverHandle,
    aend_abandoned_transactions,
    postgres_conninfo,
)
from planner.registry import get_graph
from planner.spec import GraphSpec, QuestionDeadline, answer_groups, question_deadline

transitions_log = logging.getLogger("planwatch.transitions")
logger = logging.getLogger("planwatch.runs")

Kind = RunEvent.Kind
State = states.State
Statement = tuple[str, list[Any]]

Batch = tuple[Run, list[dict[str, Any]], str]
"""One run's share of a write: the run, its new event rows (numbered) and its node now."""

RUN_FIELDS = {field.name: field for field in Run._meta.concrete_fields}
"""Run's fields by name: their conversions are how a value is stored (Django's own)."""

EVENT_COLUMNS = ("seq", "kind", "node", "namespace", "step", "task_id", "checkpoint_id",
                 "payload", "duration_ms", "at")
"""An event row's columns in a write's JSON batch, after ``run_id`` (``created_at`` is the
same for every row of a write: a parameter; ``at``, when the thing happened, is each
row's own)."""


# -- transitions: the fields each one sets ------------------------------------------------

Fields = dict[str, Any]
"""Column values of a run, as a transition sets them."""


@dataclass(frozen=True)
class FirstSet:
    """A value a column takes only if it has none yet (``COALESCE(column, value)``)."""

    value: Any


def stale_before(now: datetime) -> datetime:
    """Heartbeats older than this belong to a dead executor."""
    return now - timedelta(seconds=planwatch_setting("STALE_AFTER_SECONDS"))


def free_q(*, owner: str, stale: datetime) -> Q:
    """ORM form of "nobody else holds the run": no owner, ``owner`` itself, or a dead one
    (the fast path's claim, :data:`CLAIM`, says the same in SQL)."""
    return Q(owner="") | Q(owner=owner) | Q(heartbeat_at__lt=stale)


def held_alive(run: Run, *, now: datetime) -> bool:
    """Whether an executor that is alive holds the run (an owner heart-beating since
    :func:`stale_before`, or not yet beating, as :func:`free_q` says): a dead one's run is
    anybody's to end or take over."""
    return bool(run.owner) and (run.heartbeat_at is None
                                or run.heartbeat_at >= stale_before(now))


def next_seq(run: Run) -> int:
    """The seq the run's next event takes (events and ``last_seq`` are written together)."""
    return run.last_seq + 1


def claim(transition: states.Transition, *, current: str, owner: str, now: datetime
          ) -> Fields:
    """An executor takes the run in state ``current`` (start, resume, go on or recover):
    it is running and heart-beats.

    It reads the breakpoints as they are now, so an earlier change needs no applying.
    """
    return {"state": states.move(current, transition), "owner": owner, "heartbeat_at": now,
            "started_at": FirstSet(now), "breakpoints_changed": False}


def release() -> Fields:
    """The executor that holds the run stops (its process drains): the run stays running,
    held by nobody, for any executor to take over at once (:func:`free_q`); a stop it
    chose is no failed attempt (a rolling restart may hand a run on before its next
    checkpoint, process after process)."""
    return {"owner": "", "attempts": 0}


def heartbeat(*, now: datetime) -> Fields:
    """The executor that holds the run is alive."""
    return {"heartbeat_at": now}


def progress(*, now: datetime, last_seq: int | None = None, current_node: str = "",
             calls: Fields | None = None) -> Fields:
    """Events were written: the run's last seq, the node it is in and its model rollups
    (``calls``, from :func:`rollups`) move on."""
    fields: Fields = {"heartbeat_at": now}
    if last_seq is not None:
        fields["last_seq"] = last_seq
    if current_node:
        fields["current_node"] = current_node
    if calls:
        fields.update(calls)
    return fields


ROLLUPS = ("model_calls", "input_tokens", "output_tokens", "total_tokens", "cost_usd")
"""The run's model-call rollups, written with the events that moved them."""


def model_call(run: Any, *, usage: dict[str, Any] | None, cost: float | None) -> Fields:
    """A model call finished: it counts, and its reported tokens and known cost add up
    (``run``: the rollups so far, as attributes).

    A rollup stays null (not reported / unknown) until some call reports it.
    """
    def add(total: Any, part: Any) -> Any:
        if part is None:
            return total
        return part if total is None else total + part

    usage = usage or {}
    return {"model_calls": run.model_calls + 1,
            "input_tokens": add(run.input_tokens, usage.get("input_tokens")),
            "output_tokens": add(run.output_tokens, usage.get("output_tokens")),
            "total_tokens": add(run.total_tokens, usage.get("total_tokens")),
            "cost_usd": add(run.cost_usd, cost)}


def rollups_after(run: Run, rows: list[dict[str, Any]]) -> Fields:
    """The model-call rollups of an in-memory ``run`` once ``rows`` (its new events) are
    written: each finished model call among them counts (:func:`model_call`)."""
    totals = SimpleNamespace(**{name: getattr(run, name) for name in ROLLUPS})
    for row in rows:
        if row["kind"] == Kind.MODEL_FINISHED:
            cost = row["payload"].get("cost")
            vars(totals).update(model_call(totals, usage=row["payload"].get("usage"),
                                           cost=cost["total"] if cost else None))
    return vars(totals).copy()


def pause(*, current: str, now: datetime, last_seq: int | None = None, current_node: str = "",
          calls: Fields | None = None) -> Fields:
    """The graph waits for an operator's answer: nobody holds the run meanwhile."""
    return {**progress(now=now, last_seq=last_seq, current_node=current_node, calls=calls),
            "state": states.move(current, states.ASK), "owner": ""}


def finish(*, status: str, current: str, now: datetime, graph: str = "",
           last_seq: int | None = None, current_node: str = "", output: Any = None,
           error: tuple[str, str] | None = None, closing: dict[str, Any] | None = None,
           calls: Fields | None = None) -> Fields:
    """The run of ``graph`` ends (succeeded, failed or cancelled), with its output or its
    error, and its outcome decided (:func:`~dashboard.runs.outcome.outcome_decide`, from
    them and ``closing``: the payload of the event that closes its log)."""
    if status not in states.ENDS:
        raise ValueError(f"{status!r} is not a final state; use one of "
                         f"{', '.join(states.ENDS)}")
    state = states.move(current, states.ENDS[State(status)])
    outcome, reason = outcome_decide(state=state, spec=_spec(graph), output=output,
                                     error=error[0] if error else "", closing=closing)
    fields = {**progress(now=now, last_seq=last_seq, current_node=current_node, calls=calls),
              "state": state, "finished_at": now, "owner": "", "cancel_requested": False,
              "outcome": outcome, "outcome_reason": reason}
    if output is not None:
        fields["output"] = output
    if error is not None:
        fields["error_message"], fields["error_traceback"] = error
    return fields


def halt(*, current: str, now: datetime, last_seq: int | None = None, current_node: str = "",
         calls: Fields | None = None) -> Fields:
    """The graph stopped at a breakpoint (or after a step): nobody holds the run meanwhile."""
    return {**progress(now=now, last_seq=last_seq, current_node=current_node, calls=calls),
            "state": states.move(current, states.HALT), "owner": "", "step_once": False,
            "breakpoints_changed": False}


def stop(*, status: str, current: str, now: datetime, graph: str = "",
         last_seq: int | None = None, current_node: str = "", output: Any = None,
         error: tuple[str, str] | None = None, closing: dict[str, Any] | None = None,
         calls: Fields | None = None) -> Fields:
    """Where an execution leaves the run (in state ``current``): waiting for an answer,
    paused at a breakpoint, or finished (``status``: one of :data:`states.STOPS`)."""
    moved: dict[str, Any] = {"current": current, "now": now, "last_seq": last_seq,
                             "current_node": current_node, "calls": calls}
    if status == State.INTERRUPTED:
        return pause(**moved)
    if status == State.PAUSED:
        return halt(**moved)
    return finish(status=status, graph=graph, output=output, error=error, closing=closing,
                  **moved)


def _spec(graph: str) -> GraphSpec | None:
    """The spec of ``graph`` (None: not given, or no longer registered)."""
    try:
        return get_graph(graph) if graph else None
    except KeyError:
        return None


def answer(*, current: str) -> Fields:
    """An operator answered one of the run's questions: it is about to resume (or takes
    the answer up when it next asks, if it runs on)."""
    return {"state": states.move(current, states.ANSWER)}


def continue_run(*, current: str, now: datetime, last_seq: int, step: bool) -> Fields:
    """An operator continued a paused run (``step``: for one super-step, then it pauses
    again), recorded at ``last_seq``: it is about to go on."""
    fields = {**progress(now=now, last_seq=last_seq),
              "state": states.move(current, states.CONTINUE)}
    if step:
        fields["step_once"] = True
    return fields


def set_breakpoints(*, before: list[str], after: list[str], held: bool) -> Fields:
    """New breakpoints; an executor that holds the run applies them at its next boundary."""
    return {"interrupt_before": before, "interrupt_after": after, "breakpoints_changed": held}


def request_cancel(*, by: str = "") -> Fields:
    """An operator asks the executor that holds the run to stop at the next node boundary."""
    return {"cancel_requested": True, "cancel_requested_by": by}


# -- the thread's status ----------------------------------------------------------------

THREAD_STATUS = {state: meaning.thread for state, meaning in states.MEANINGS.items()}
"""The status a LangGraph thread takes when its latest run takes a state."""

QUEUED_THREAD = THREAD_STATUS[State.QUEUED]
"""A thread with a new run (started, forked or enqueued on it)."""


def thread_status(fields: Fields) -> str | None:
    """The thread status a transition's ``fields`` give its run's thread (None: unchanged):
    its state's, or a finished run's outcome's (a failed plan's thread is in error)."""
    state = fields.get("state")
    return None if state is None else thread_status_of(state, fields.get("outcome"))


def thread_status_of(state: str, outcome: str | None) -> str:
    """The status a thread takes from its latest run, in ``state`` with ``outcome``."""
    return outcome_meaning(outcome).thread if outcome else THREAD_STATUS[State(state)]


def log_transition(run_id: Any, fields: Fields, *, graph: str = "") -> None:
    """One log record (``planwatch.transitions``, INFO) for a change of a run's state that
    was written: with ``PLANWATCH_LOG_FORMAT=json`` one JSON line carrying the run id."""
    state = fields.get("state")
    if state is None or not transitions_log.isEnabledFor(logging.INFO):
        return
    extra: dict[str, Any] = {"run_id": str(run_id), "status": str(state)}
    if graph:
        extra["graph"] = graph
    if fields.get("owner"):
        extra["owner"] = fields["owner"]
    transitions_log.info("run %s %s", run_id, state, extra=extra)


def apply_to(run: Run, fields: Fields) -> None:
    """Mirror ``fields`` on an in-memory ``run`` (after they were written), its status as
    the database derives it included, and log a change of its state."""
    if fields.get("state") not in (None, run.state) or "owner" in fields:
        log_transition(run.id, fields, graph=run.graph)
    for name, value in fields.items():
        if isinstance(value, FirstSet):
            if getattr(run, name) is None:
                setattr(run, name, value.value)
        else:
            setattr(run, name, value)
    if "state" in fields:
        run.status = states.status_of(run.state)


# -- the SQL of both paths ---------------------------------------------------------------
# Literal statements, one text per write (two where the databases' SQL differs: JSON
# batches); ``{mark}`` is the placeholder :func:`_sql` makes the driver's. A new column of
# Run or RunEvent that a write must carry is added to the model and to these.

INSERT_EVENTS = {
    "postgresql": """
        INSERT INTO dashboard_runevent (run_id, seq, kind, node, namespace, step, task_id,
                                        checkpoint_id, payload, duration_ms, at, created_at)
        SELECT e.run_id, e.seq, e.kind, e.node, e.namespace, e.step, e.task_id,
               e.checkpoint_id, e.payload, e.duration_ms, e.at, {mark}
        FROM jsonb_to_recordset({mark}::jsonb) AS e(
            run_id uuid, seq integer, kind text, node text, namespace text, step integer,
            task_id text, checkpoint_id text, payload jsonb, duration_ms double precision,
            at timestamptz)
    """,
    # json_extract gives SQL values for scalars and JSON text for the payload (always an
    # object), as Django's JSONField stores it on SQLite
    "sqlite": """
        INSERT INTO dashboard_runevent (run_id, seq, kind, node, namespace, step, task_id,
                                        checkpoint_id, payload, duration_ms, at, created_at)
        SELECT json_extract(e.value, '$.run_id'), json_extract(e.value, '$.seq'),
               json_extract(e.value, '$.kind'), json_extract(e.value, '$.node'),
               json_extract(e.value, '$.namespace'), json_extract(e.value, '$.step'),
               json_extract(e.value, '$.task_id'), json_extract(e.value, '$.checkpoint_id'),
               json_extract(e.value, '$.payload'), json_extract(e.value, '$.duration_ms'),
               json_extract(e.value, '$.at'), {mark}
        FROM json_each({mark}) AS e
    """,
}
"""Insert a write's event rows (parameters: created_at, the rows as one JSON array)."""

PROGRESS = {
    "postgresql": """
        UPDATE dashboard_run SET last_seq = p.last_seq, current_node = p.current_node,
            model_calls = p.model_calls, input_tokens = p.input_tokens,
            output_tokens = p.output_tokens, total_tokens = p.total_tokens,
            cost_usd = p.cost_usd, heartbeat_at = {mark},
            attempts = CASE WHEN p.checkpointed THEN 0 ELSE dashboard_run.attempts END,
            attempt_error = CASE WHEN p.checkpointed THEN ''
                                 ELSE dashboard_run.attempt_error END
        FROM jsonb_to_recordset({mark}::jsonb) AS p(
            id uuid, last_seq integer, current_node text, model_calls integer,
            input_tokens integer, output_tokens integer, total_tokens integer,
            cost_usd double precision, checkpointed boolean)
        WHERE dashboard_run.id = p.id
    """,
    "sqlite": """
        UPDATE dashboard_run SET last_seq = p.last_seq, current_node = p.current_node,
            model_calls = p.model_calls, input_tokens = p.input_tokens,
            output_tokens = p.output_tokens, total_tokens = p.total_tokens,
            cost_usd = p.cost_usd, heartbeat_at = {mark},
            attempts = CASE WHEN p.checkpointed THEN 0 ELSE dashboard_run.attempts END,
            attempt_error = CASE WHEN p.checkpointed THEN ''
                                 ELSE dashboard_run.attempt_error END
        FROM (SELECT json_extract(j.value, '$.id') AS id,
                     json_extract(j.value, '$.last_seq') AS last_seq,
                     json_extract(j.value, '$.current_node') AS current_node,
                     json_extract(j.value, '$.model_calls') AS model_calls,
                     json_extract(j.value, '$.input_tokens') AS input_tokens,
                     json_extract(j.value, '$.output_tokens') AS output_tokens,
                     json_extract(j.value, '$.total_tokens') AS total_tokens,
                     json_extract(j.value, '$.cost_usd') AS cost_usd,
                     json_extract(j.value, '$.checkpointed') AS checkpointed
              FROM json_each({mark}) AS j) AS p
        WHERE dashboard_run.id = p.id
    """,
}
"""Every run of a write moves on: its last seq, its node, its model-call rollups
(:data:`ROLLUPS`) and its heartbeat, and a run that wrote a checkpoint got on: its
attempts start again (parameters: heartbeat_at, one JSON array of ``{id, last_seq,
current_node, <rollups>, checkpointed}``)."""

HEARTBEAT = {
    "postgresql": """
        UPDATE dashboard_run SET heartbeat_at = {mark}
        WHERE id IN (SELECT id FROM dashboard_run
                     WHERE id IN (SELECT value::uuid
                                  FROM jsonb_array_elements_text({mark}::jsonb))
                       AND owner = {mark}
                     -- the rows locked in the ids' order, as every write of several runs
                     -- locks them (a batched event write's fence): else the two deadlock
                     ORDER BY id FOR NO KEY UPDATE)
        RETURNING id, cancel_requested, breakpoints_changed
    """,
    "sqlite": """
        UPDATE dashboard_run SET heartbeat_at = {mark}
        WHERE id IN (SELECT value FROM json_each({mark})) AND owner = {mark}
        RETURNING id, cancel_requested, breakpoints_changed
    """,
}
"""An executor is alive for the runs it holds (:func:`heartbeat`), and learns which of them
an operator asked to cancel or gave new breakpoints (parameters: heartbeat_at, the run ids
as one JSON array, owner)."""

CLAIM_FIELDS = ("state", "owner", "heartbeat_at", "started_at", "breakpoints_changed")
"""The fields :func:`claim` sets, in :data:`TAKE`'s order."""

TAKE = """
    UPDATE dashboard_run
    SET state = {mark}, owner = {mark}, heartbeat_at = {mark},
        started_at = COALESCE(started_at, {mark}), breakpoints_changed = {mark},
        epoch = epoch + 1,
        -- (the right-hand sides read the row as it was: a recovery takes a running run)
        attempts = CASE WHEN state = 'running' THEN attempts + 1 ELSE 1 END,
        attempt_error = CASE WHEN state = 'running' THEN attempt_error ELSE '' END
    WHERE id = {mark}"""
"""An executor takes the run: :func:`claim`'s write, on both paths, moving the run's
fencing epoch on and counting the attempt (a start or resume is the first, a recovery one
more: :func:`attempts_after`) (parameters: the claim's :data:`CLAIM_FIELDS`, run id). The
ORM path decides under the run's lock; :data:`CLAIM` adds its conditions to decide in the
statement."""

UNFINISHED_SQL = ", ".join(f"'{s.value}'" for s in states.UNFINISHED)
"""The unfinished states as a SQL list: those a stop may still move a run from."""

STOP_FIELDS = ("state", "heartbeat_at", "last_seq", "current_node", *ROLLUPS, "finished_at",
               "cancel_requested", "step_once", "breakpoints_changed", "output",
               "error_message", "error_traceback", "outcome", "outcome_reason")
"""The fields :func:`stop` may set (nobody holds the run after it), in :data:`STOP`'s
order; one it leaves out is passed as null and keeps its value."""

STOP = """
    UPDATE dashboard_run
    SET owner = '', state = {mark}, heartbeat_at = {mark},
        last_seq = COALESCE({mark}, last_seq), current_node = COALESCE({mark}, current_node),
        model_calls = COALESCE({mark}, model_calls),
        input_tokens = COALESCE({mark}, input_tokens),
        output_tokens = COALESCE({mark}, output_tokens),
        total_tokens = COALESCE({mark}, total_tokens), cost_usd = COALESCE({mark}, cost_usd),
        finished_at = COALESCE({mark}, finished_at),
        cancel_requested = COALESCE({mark}, cancel_requested),
        step_once = COALESCE({mark}, step_once),
        breakpoints_changed = COALESCE({mark}, breakpoints_changed),
        output = COALESCE({mark}, output), error_message = COALESCE({mark}, error_message),
        error_traceback = COALESCE({mark}, error_traceback),
        outcome = COALESCE({mark}, outcome), outcome_reason = COALESCE({mark}, outcome_reason)
    WHERE id = {mark}
      -- a final state is set once: a stop that comes after it (an operator's cancel of a
      -- run its executor had let go, say) leaves it
      AND state IN (""" + UNFINISHED_SQL + """)
"""
"""Where an execution leaves a run (:func:`stop`: waiting, paused or finished), on both
paths, unless it ended already (parameters: :data:`STOP_FIELDS`, run id)."""

RETURNED = ("graph", "thread_id", "input", "current_node", "last_seq", "started_at",
            "interrupt_before", "interrupt_after", "step_once", "configurable", "context",
            "recursion_limit", "stream_tokens", "budget", "epoch", "model_settings")
"""The columns :data:`CLAIM` returns: what an execution reads of the run it took."""


def _among(states_: tuple[str, ...] | Any) -> str:
    """A SQL list of state values (the table's own, never a client's)."""
    return ", ".join(f"'{State(s).value}'" for s in states_)


CLAIM = TAKE + """ AND state IN (""" + _among(states.START.moves) + """)
      AND (owner = '' OR owner = {mark} OR heartbeat_at < {mark})
      -- a fork copies its parent's state first: the ORM path
      AND parent_id IS NULL
      -- another run of its thread executes: this one waits (and is dispatched when that
      -- one stops); the constraint run_one_running_per_thread settles a race
      AND NOT EXISTS (SELECT 1 FROM dashboard_run AS sibling
                      WHERE sibling.conversation_id = dashboard_run.conversation_id
                        AND sibling.state = 'running' AND sibling.id <> dashboard_run.id)
      {lock_thread}
    RETURNING """ + ", ".join(RETURNED)
"""Take a queued run (:data:`states.START`; parameters: the claim's :data:`CLAIM_FIELDS`,
run id, owner, stale)."""

WITHDRAW_QUESTIONS = """
    UPDATE dashboard_interrupt SET status = 'cancelled'
    WHERE run_id = {mark} AND status = 'pending'
"""
"""The questions a failed or cancelled run leaves are withdrawn (parameter: run id)."""

SET_THREAD_STATUS = """
    UPDATE dashboard_thread SET status = CASE
        WHEN EXISTS (SELECT 1 FROM dashboard_run AS queued
                     WHERE queued.conversation_id = dashboard_thread.id
                       AND queued.state = 'queued' AND queued.waits_for_id IS NOT NULL
                       AND queued.id <> {mark}) THEN 'busy'
        ELSE {mark} END
    WHERE id = (SELECT conversation_id FROM dashboard_run WHERE id = {mark})
      AND NOT EXISTS (SELECT 1 FROM dashboard_run AS this, dashboard_run AS newer
                      WHERE this.id = {mark} AND newer.conversation_id = this.conversation_id
                        AND newer.created_at > this.created_at
                        AND NOT (newer.state = 'queued' AND newer.waits_for_id IS NOT NULL))
"""
"""How a run's new status reaches its thread, on both paths (parameters: run id, thread
status, run id, run id): the thread takes it only from its latest run (runs enqueued
behind it aside), and stays busy while runs are enqueued on it. :data:`THREAD_OF_NEW_RUN`
says the same rule for a run its own statement inserts: change both together."""

STOP_THREAD_STATUS = SET_THREAD_STATUS + """
      -- only from a stop that moved the run (STOP leaves a run that ended already): as
      -- this statement reads the run, it is still unfinished (PostgreSQL's fast path, one
      -- statement whose parts read the run as it was before) or in the state the stop
      -- wrote (one statement after the other in a transaction: the STOP's effect is seen);
      -- a stop refused leaves it in another final state
      AND EXISTS (SELECT 1 FROM dashboard_run AS stopped
                  WHERE stopped.id = {mark}
                    AND (stopped.state IN (""" + UNFINISHED_SQL + """) OR stopped.state = {mark}))
"""
"""How a stop's new status reaches its thread, on both paths (parameters: those of
:data:`SET_THREAD_STATUS`, run id, the state the stop writes): as
:data:`SET_THREAD_STATUS`, and only if the stop took effect, so a late final write that
left a cancelled run cancelled leaves its thread as the cancel set it."""


FENCE = {
    # raises (SQLSTATE PWF01) unless every run's epoch is the writer's, holding their rows
    # share-locked until the write commits (migration 0033's function)
    "postgresql": """
        SELECT planwatch_fence(f.id, f.epoch)
        FROM jsonb_to_recordset({mark}::jsonb) AS f(id uuid, epoch integer)
        -- first (an init plan), the runs' rows locked for the write's UPDATEs in their
        -- ids' order, as a heartbeat locks them: the fence's share lock, upgraded by the
        -- write's UPDATE of the run while a heartbeat or a claim waited on the row,
        -- deadlocked (a stuck run: the victim's write was retried run by run, and a
        -- stop chosen as one failed its job)
        WHERE (SELECT count(*) FROM (
                   SELECT 1 FROM dashboard_run
                   WHERE id IN (SELECT (held->>'id')::uuid
                                FROM jsonb_array_elements({mark}::jsonb) AS held)
                   {lock_threads}
                   ORDER BY id FOR NO KEY UPDATE) AS locked) >= 0
    """,
    # inside the write's transaction, which holds SQLite's one write lock
    "sqlite": """
        SELECT count(*) FROM dashboard_run AS r JOIN json_each({mark}) AS f
          ON r.id = json_extract(f.value, '$.id') AND r.epoch = json_extract(f.value, '$.epoch')
    """,
}
"""The fence of an executor's write (parameter: its runs' ``{id, epoch}`` as one JSON
array): the write commits only if no other executor claimed one of its runs since this
one did. On PostgreSQL the write's statements are CTEs of this query (one statement: a
claim that commits before the fence's lock is seen by it, and one after waits for the
write); on SQLite it is read before the commit, and a short count rolls the write back."""


LOCK_THREAD = """
      -- its thread's row first (checked last, so only for a run it takes), then the run's
      -- as the UPDATE writes it: the order of every writer of both (see lock_run)
      AND (conversation_id IS NULL OR EXISTS (
          SELECT 1 FROM dashboard_thread AS thread
          WHERE thread.id = dashboard_run.conversation_id FOR UPDATE))
"""
"""PostgreSQL's part of :data:`CLAIM` (SQLite has one writer at a time: no row locks)."""

LOCK_THREADS_FIRST = """
                     -- a stop writes the thread too: its row first, as a claim and a run
                     -- request's decision take them (thread, then run)
                     AND (SELECT count(*) FROM (
                              SELECT 1 FROM dashboard_thread
                              WHERE id IN (SELECT conversation_id FROM dashboard_run
                                           WHERE id IN (SELECT (held->>'id')::uuid
                                                        FROM jsonb_array_elements(
                                                            {mark}::jsonb) AS held))
                              ORDER BY id FOR NO KEY UPDATE) AS threads) >= 0
"""
"""PostgreSQL's part of a stop's :data:`FENCE`."""


def _sql(statement: str, postgres: bool, *, django_cursor: bool = False) -> str:
    """``statement`` for a driver's own cursor: psycopg's ``%s`` or sqlite3's ``?``.

    Through Django's cursor it is always ``%s`` (``django_cursor``): Django turns it into
    the driver's style itself, and its debug cursor (``DEBUG=true``) formats the statement
    with ``%`` to log it, which a ``?`` statement with parameters fails."""
    return statement.format(mark="%s" if postgres or django_cursor else "?",
                            lock_thread=LOCK_THREAD.strip() if postgres else "",
                            lock_threads="")


class Statements:
    """The statements above for one database and one kind of cursor (a driver's own, or
    Django's), with their values converted by Django's own fields, so either path stores
    exactly what the ORM would (SQLite's text datetimes and hex UUIDs included)."""

    def __init__(self, postgres: bool, *, django_cursor: bool = False) -> None:
        vendor = "postgresql" if postgres else "sqlite"
        self.postgres = postgres
        self.insert_sql, self.progress_sql, self.heartbeat_sql, self.claim_sql, \
            self.take_sql, self.stop_sql, self.withdraw_sql, self.thread_sql, \
            self.stop_thread_sql, self.fence_sql = (
                _sql(text, postgres, django_cursor=django_cursor)
                for text in (INSERT_EVENTS[vendor], PROGRESS[vendor], HEARTBEAT[vendor],
                             CLAIM, TAKE, STOP, WITHDRAW_QUESTIONS, SET_THREAD_STATUS,
                             STOP_THREAD_STATUS, FENCE[vendor]))
        self.stop_fence_sql = (FENCE[vendor].replace("{lock_threads}", LOCK_THREADS_FIRST)
                               .format(mark="%s") if postgres else self.fence_sql)
        self._connection = connections["default"]  # its fields' conversions, never a query

    def insert(self, batches: list[Batch], now: datetime) -> Statement:
        """:data:`INSERT_EVENTS` of the batches' rows, written ``now``."""
        rows = jsonsafe.dumps([
            {"run_id": str(self.prep("id", run.id)),
             **{name: row[name] for name in EVENT_COLUMNS if name != "at"},
             "at": self._moment_text(row.get("at") or now)}
            for run, rows, _ in batches for row in rows
        ])
        return self.insert_sql, [self._moment(now), rows]

    def progress(self, moves: list[Fields], now: datetime) -> Statement:
        """:data:`PROGRESS` of each run's ``{id, current_node, last_seq, <rollups>}``."""
        moved = sorted(({**move, "id": str(self.prep("id", move["id"]))} for move in moves),
                       key=lambda move: move["id"])  # in the order rows are locked
        return self.progress_sql, [self._moment(now), jsonsafe.dumps(moved)]

    def fence(self, runs: list[Run], *, stop: bool = False) -> Statement:
        """:data:`FENCE`: each run's epoch as its claim left it (``stop``: a write that
        writes the runs' threads too, whose rows it locks first)."""
        # in the runs' ids' order (a UUID's text sorts as its bytes do): every writer of
        # several runs locks them in that order, so two never wait on each other
        held = jsonsafe.dumps(sorted(
            ({"id": str(self.prep("id", run.id)), "epoch": run.epoch} for run in runs),
            key=lambda row: row["id"]))
        if not self.postgres:
            return self.fence_sql, [held]
        return (self.stop_fence_sql, [held, held, held]) if stop else (self.fence_sql,
                                                                       [held, held])

    def heartbeat(self, run_ids: list[uuid.UUID], owner: str, fields: Fields) -> Statement:
        """:data:`HEARTBEAT`: :func:`heartbeat`'s ``fields`` for the runs ``owner`` holds."""
        ids = jsonsafe.dumps(sorted(str(self.prep("id", run_id)) for run_id in run_ids))
        return self.heartbeat_sql, [self.prep("heartbeat_at", fields["heartbeat_at"]), ids,
                                    owner]

    def take(self, run_id: Any, fields: Fields) -> Statement:
        """:data:`TAKE`: :func:`claim`'s ``fields`` written to the run."""
        assert tuple(fields) == CLAIM_FIELDS, "claim and TAKE disagree"
        return self.take_sql, [*self.values(fields, CLAIM_FIELDS), self.prep("id", run_id)]

    def stop(self, run_id: Any, fields: Fields) -> Statement:
        """:data:`STOP`: :func:`stop`'s ``fields`` written to the run."""
        assert fields.get("owner") == "" and set(fields) <= {"owner", *STOP_FIELDS}, fields
        return self.stop_sql, [*self.values(fields, STOP_FIELDS), self.prep("id", run_id)]

    def thread(self, run_id: Any, fields: Fields) -> list[Statement]:
        """:data:`SET_THREAD_STATUS`, if ``fields`` change the run's state: the status the
        state gives its thread."""
        status = thread_status(fields)
        return [] if status is None else [self.thread_status(run_id, status)]

    def stop_thread(self, run_id: Any, fields: Fields) -> Statement:
        """:data:`STOP_THREAD_STATUS`: the status :func:`stop`'s ``fields`` give the run's
        thread, if the stop took effect (and the run is the thread's latest)."""
        run, state = self.prep("id", run_id), self.prep("state", fields["state"])
        return self.stop_thread_sql, [run, str(thread_status(fields)), run, run, run, state]

    def thread_status(self, run_id: Any, status: str) -> Statement:
        """:data:`SET_THREAD_STATUS`: the run's thread takes ``status`` if it is its latest."""
        run = self.prep("id", run_id)
        return self.thread_sql, [run, str(status), run, run]

    def withdraw(self, run_id: Any) -> Statement:
        """:data:`WITHDRAW_QUESTIONS` of the run."""
        return self.withdraw_sql, [self.prep("id", run_id)]

    def values(self, fields: Fields, names: tuple[str, ...]) -> list[Any]:
        """``fields``' values in the order of ``names`` (None for one they leave out)."""
        return [self.prep(name, v.value if isinstance(v, FirstSet) else v)
                if (v := fields.get(name)) is not None else None for name in names]

    def prep(self, column: str, value: Any) -> Any:
        """``value`` as Django's field for ``column`` of Run stores it on this database."""
        return RUN_FIELDS[column].get_db_prep_save(value, self._connection)

    def run(self, run_id: uuid.UUID, row: tuple[Any, ...]) -> Run:
        """A run made of a :data:`RETURNED` row, its values converted by Django's fields as
        a query's are (the fast path's cursors are the drivers' own)."""
        values = {}
        for name, value in zip(RETURNED, row, strict=True):
            col = RUN_FIELDS[name].get_col(Run._meta.db_table)
            for convert in (*self._connection.ops.get_db_converters(col),
                            *col.get_db_converters(self._connection)):
                value = convert(value, col, self._connection)
            values[name] = value
        return Run(id=run_id, **values)  # a fresh run: its other columns' defaults

    def _moment(self, value: datetime) -> Any:
        """A moment as Django stores it on this database (SQLite: naive UTC text)."""
        return self._connection.ops.adapt_datetimefield_value(value)

    def _moment_text(self, value: datetime) -> str:
        """A moment as text in a JSON batch: SQLite's stored form, ISO 8601 with its offset
        for PostgreSQL's ``timestamptz``."""
        stored = self._moment(value)
        return stored if isinstance(stored, str) else value.isoformat()


def _django_statements() -> Statements:
    """The statements for Django's own cursor on the default database."""
    return Statements(connection.vendor == "postgresql", django_cursor=True)


def _written(statements: list[Statement]) -> None:
    """Run ``statements`` on Django's cursor, in the caller's transaction."""
    with connection.cursor() as cursor:
        for sql, params in statements:
            cursor.execute(sql, params)


def statements_of(sql: Statements, run_id: Any, fields: Fields) -> list[Statement] | None:
    """The statements that write a claim's or a stop's ``fields`` to the run and its
    thread, on either path (None: another transition, an ORM update)."""
    if isinstance(fields.get("started_at"), FirstSet):
        return [sql.take(run_id, fields), *sql.thread(run_id, fields)]
    if "state" in fields and fields.get("owner") == "":
        # the thread follows only a stop that took effect (one after a final state is not)
        return [sql.stop(run_id, fields), sql.stop_thread(run_id, fields)]
    return None


# -- the ORM path --------------------------------------------------------------------------


def orm_fields(fields: Fields) -> dict[str, Any]:
    """``fields`` as keyword arguments of ``QuerySet.update`` (``FirstSet`` → ``Coalesce``)."""
    return {name: Coalesce(F(name), value.value) if isinstance(value, FirstSet)
            else value for name, value in fields.items()}


NEW_RUN = """
    INSERT INTO dashboard_run ({columns})
    SELECT {values}
    -- the user's queued runs counted up to the limit: refused (nothing written) at it; the
    -- statement comes after the user's row was locked (a statement of its own before it,
    -- or the thread's lock: thread_locked), so its snapshot sees every run a request
    -- that held the lock before queued
    WHERE NOT %s OR (SELECT count(*) FROM (
              SELECT 1 FROM dashboard_run WHERE created_by_id = %s AND state = 'queued'
              LIMIT %s) AS queued) < %s
"""
"""Insert a new queued run unless its user has their limit of queued runs (parameters: the
run's :func:`_new_run_fields`, whether its user's runs count, the user's id, the limit
twice)."""

NEW_LANGGRAPH_RUN = """
    INSERT INTO dashboard_langgraphrun (id, run_id, first_seq, created_at, superseded_at,
                                        went_on_from, rollback_requested_at)
    SELECT id, id, 1, created_at, NULL, '', NULL FROM {run} WHERE id = %s
"""
"""A new run's first LangGraph run (:func:`first_langgraph_run`), from the run's row as
inserted: nothing if it was refused (parameter: run id)."""

THREAD_OF_NEW_RUN = """
    UPDATE dashboard_thread SET graph = %s,
        updated_at = CASE WHEN graph = %s THEN updated_at ELSE %s END,
        -- SET_THREAD_STATUS's rule for a run just inserted (which PostgreSQL's CTEs do not
        -- see: named by its id and creation time): from the thread's latest run only, and
        -- busy while runs are enqueued on it
        status = CASE
            WHEN EXISTS (SELECT 1 FROM dashboard_run AS newer
                         WHERE newer.conversation_id = dashboard_thread.id
                           AND newer.id <> %s AND newer.created_at > %s
                           AND NOT (newer.state = 'queued' AND newer.waits_for_id IS NOT NULL))
                THEN status
            WHEN EXISTS (SELECT 1 FROM dashboard_run AS queued
                         WHERE queued.conversation_id = dashboard_thread.id
                           AND queued.state = 'queued' AND queued.waits_for_id IS NOT NULL
                           AND queued.id <> %s) THEN 'busy'
            ELSE %s END
    WHERE id = %s AND EXISTS (SELECT 1 FROM {run} WHERE id = %s)
"""
"""A new run's thread runs its graph (``updated_at`` moves if that changed) and is busy
with it, if the run was inserted (parameters: graph twice, now, run id, created_at, run id,
thread status, thread id, run id)."""

LOCK_THREAD_AND_USER = """
    WITH thread AS (UPDATE dashboard_thread SET updated_at = %s WHERE id = %s RETURNING id)
    SELECT 1 FROM auth_user
    -- the thread's row first (an init plan: the CTE runs before the user's row is read),
    -- then the user's, the order of every transaction that holds both
    WHERE id = %s AND (SELECT count(*) FROM thread) >= 0
    FOR UPDATE
"""
"""PostgreSQL: hold a thread's row, then its run request's user's (whose queued runs a new
run counts), in one statement (parameters: now, thread id, user id or null)."""

LOCK_USER = "SELECT 1 FROM auth_user WHERE id = %s FOR UPDATE"
"""PostgreSQL: hold a user's row, so that their queued runs are counted one request at a
time (parameter: user id)."""

_USER_HELD: contextvars.ContextVar[tuple[Any, Any] | None] = contextvars.ContextVar(
    "planwatch_user_held", default=None)
"""The connection and the user whose row :func:`thread_locked` holds in its transaction."""


@contextlib.contextmanager
def thread_locked(thread_id: Any, *, user_id: Any = None) -> Iterator[None]:
    """Inside the caller's transaction, hold the thread's row until it ends, then (with
    ``user_id``) the user's, so a run the transaction creates counts the user's queued runs
    without another statement (:func:`create_run`). PostgreSQL: one statement; SQLite: the
    IMMEDIATE transaction already holds the database's one write lock."""
    if connection.vendor == "sqlite":
        yield
        return
    now = Thread._meta.get_field("updated_at").get_db_prep_save(timezone.now(), connection)
    with connection.cursor() as cursor:
        cursor.execute(LOCK_THREAD_AND_USER, [now, thread_id, user_id])
    token = _USER_HELD.set((connections["default"], user_id) if user_id is not None else None)
    try:
        yield
    finally:
        _USER_HELD.reset(token)


def _lock_user(user_id: Any) -> None:
    """Hold the user's row until the transaction ends, unless :func:`thread_locked` does
    (PostgreSQL; SQLite's transactions take its one write lock)."""
    if connection.vendor == "sqlite" or _USER_HELD.get() == (connections["default"], user_id):
        return
    with connection.cursor() as cursor:
        cursor.execute(LOCK_USER, [user_id])


@functools.cache
def _new_run_fields() -> tuple[Any, ...]:
    """The columns a new run's INSERT writes: all of Run's but the generated ``status``."""
    return tuple(f for f in Run._meta.local_concrete_fields if not f.generated)


@functools.cache
def _new_run_sql(postgres: bool) -> tuple[str, ...]:
    """:data:`NEW_RUN`, its first LangGraph run and its thread's update: on PostgreSQL one
    statement (data-modifying CTEs, answering 1 if the run was inserted), on SQLite three."""
    fields = _new_run_fields()
    run = NEW_RUN.format(columns=", ".join(f.column for f in fields),
                         values=", ".join(["%s"] * len(fields)))
    if not postgres:
        return (run, NEW_LANGGRAPH_RUN.format(run="dashboard_run"),
                THREAD_OF_NEW_RUN.format(run="dashboard_run"))
    return (f"WITH run AS ({run} RETURNING id, created_at), "
            f"langgraph_run AS ({NEW_LANGGRAPH_RUN.format(run='run')}), "
            f"thread AS ({THREAD_OF_NEW_RUN.format(run='run')}) "
            "SELECT count(*) FROM run",)


def create_run(*, queued_limit: int | None = None, **columns: Any) -> Run:
    """A new run, queued (started, forked or enqueued), its first LangGraph run (with the
    run's id, :func:`first_langgraph_run`), and its thread running its graph and busy with
    it, written together (PostgreSQL: one statement), nothing read back.

    ``queued_limit``: refused (:class:`QueueFull`, nothing written) if its creator has that
    many queued runs already, counted under the creator's row lock (taken here, unless
    :func:`thread_locked` holds it)."""
    run = Run(**columns)
    counted = queued_limit is not None and run.created_by_id is not None
    if counted:
        _lock_user(run.created_by_id)
    values = [f.get_db_prep_save(f.pre_save(run, True), connection) for f in _new_run_fields()]
    moment = Run._meta.get_field("created_at").get_db_prep_save
    now, created = moment(timezone.now(), connection), moment(run.created_at, connection)
    uid = Run._meta.pk.get_db_prep_save(run.id, connection)
    thread = Thread._meta.pk.get_db_prep_save(run.conversation_id, connection)
    params = [[*values, counted, run.created_by_id, queued_limit or 0, queued_limit or 0],
              [uid],
              [run.graph, run.graph, now, uid, created, uid, str(QUEUED_THREAD), thread, uid]]
    statements = _new_run_sql(connection.vendor == "postgresql")
    with connection.cursor() as cursor:
        if len(statements) == 1:  # PostgreSQL: one statement
            cursor.execute(statements[0], [p for ps in params for p in ps])
            written = bool(cursor.fetchone()[0])
        else:
            cursor.execute(statements[0], params[0])
            if written := cursor.rowcount == 1:
                for sql, ps in zip(statements[1:], params[1:], strict=True):
                    cursor.execute(sql, ps)
    if not written:
        raise QueueFull(queued_limit or 0)
    run._state.adding, run._state.db = False, connection.alias
    run.status = states.status_of(run.state)  # the database's to derive: as it derives it
    return run


class QueueFull(Exception):
    """A new run was refused: its creator has ``limit`` queued runs (:func:`create_run`)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"{limit} runs queued")
        self.limit = limit


def first_langgraph_run(run: Run) -> LangGraphRun:
    """A new run's first LangGraph run, as :func:`create_run` writes it (so its caller
    need not read it back)."""
    return LangGraphRun.first_of(run)


def apply(run_id: Any, fields: Fields, *, before: Run | None = None) -> None:
    """Write a transition's ``fields`` to one run, and its new status to its thread: a
    claim or a stop by its statement (as the fast path writes it), an operator's request
    by the ORM. ``before``: the run as this transaction locked it, before the transition;
    a run that had stopped for an operator and goes on gets its next LangGraph run
    (:func:`states.goes_on`)."""
    written = statements_of(_django_statements(), run_id, fields)
    if written is not None:
        _written(written)
    else:
        Run.objects.filter(id=run_id).update(**orm_fields(fields))
        if (status := thread_status(fields)) is not None:
            set_thread_status(run_id, status)
    if before is not None and "state" in fields and states.goes_on(before.state,
                                                                   fields["state"]):
        langgraph_run_next(before)
    log_transition(run_id, fields)


def set_stream_tokens(run_id: Any, stream_tokens: bool) -> None:
    """Whether the run's model calls stream their tokens from its next execution on."""
    Run.objects.filter(id=run_id).update(stream_tokens=stream_tokens)


def set_budget(run_id: Any, budget: dict[str, Any]) -> None:
    """The run's budgets, as an operator raised them (from its next execution on)."""
    Run.objects.filter(id=run_id).update(budget=budget)


def langgraph_run_next(before: Run) -> LangGraphRun:
    """The next LangGraph run of a run going on (a resume, a continue), its events from the
    first seq after ``before`` (the run as locked before the request wrote anything); the
    one before it is superseded."""
    now = timezone.now()
    LangGraphRun.objects.filter(run_id=before.id).current().update(superseded_at=now)
    return LangGraphRun.objects.create(run_id=before.id, first_seq=before.last_seq + 1,
                                       created_at=now, went_on_from=before.state)


def request_roll_back(langgraph_run_id: Any, *, now: datetime) -> None:
    """A client asks to roll a LangGraph run back once its ``Run`` stopped (written with
    the cancel, so a crash before the stop forgets nothing: :func:`roll_back_requested`)."""
    LangGraphRun.objects.filter(id=langgraph_run_id).update(rollback_requested_at=now)


def roll_back(*, current: str, to: str, last_seq: int, current_node: str, calls: Fields
              ) -> Fields:
    """A LangGraph run of the run that went on after it waited is rolled back: the run
    waits again where it waited (``to``), its log ends at ``last_seq`` (the seq before the
    LangGraph run's first), its node and model-call rollups (``calls``) as the log left
    them, nothing of how the LangGraph run ended kept."""
    return {"state": states.move(current, states.ROLL_BACK, to=to), "last_seq": last_seq,
            "current_node": current_node, **calls, "finished_at": None, "output": None,
            "error_message": "", "error_traceback": "", "outcome": None, "outcome_reason": "",
            "cancel_requested": False,
            "cancel_requested_by": "", "step_once": False}


def delete_run(locked: Run) -> None:
    """Delete a run this transaction holds (:data:`states.DELETE`), with its events; its
    thread's status is then its latest remaining run's, and the checkpoints naming its
    LangGraph runs go once the transaction commits (the thread's state is then where it
    was before the run)."""
    held = [(locked.thread_id, i) for i in locked.langgraph_run_ids()]
    thread_id = locked.conversation_id
    states.move(locked.state, states.DELETE)
    locked.delete()
    if thread_id is not None:
        settle_thread(thread_id)
    transaction.on_commit(lambda: checkpoints_delete(runs=held))


ROLLED_BACK, DELETED = "rolled back", "deleted"
"""What :func:`roll_back_requested` did: the run waits again as before the LangGraph run
it rolled back, or that LangGraph run was the run's first and the run is gone."""


def roll_back_requested(run_id: Any) -> str:
    """Roll back the LangGraph run of the run that a client asked to roll back, once the
    run stopped (:data:`ROLLED_BACK`, or :data:`DELETED` for its first: the run goes),
    in one transaction: "" if none was asked, or the run still executes. Exactly once,
    whoever sees the run stop first (its executor, the request that waits for it, the
    recovery sweep); a run whose executor died (its heartbeat stale, or none holds it) is
    ended cancelled first, as an operator's cancel ends a run nobody holds.

    A rollback (:data:`states.ROLL_BACK`) deletes the LangGraph run's events (the log is
    gapless: its ``last_seq`` goes back to the seq before its first), its checkpoints and
    the writes it left where it went on from (:func:`~dashboard.checkpoints.
    langgraph_run_undo`), the questions it asked; the answers it took up wait again, as
    do the questions the cancel withdrew; the LangGraph run before it is current again.
    """
    now = timezone.now()
    with transaction.atomic():
        locked = lock_run(run_id)
        undone = None if locked is None else locked.langgraph_runs.to_roll_back().first()
        if locked is None or undone is None:
            return ""
        if locked.is_busy():
            if locked.state != State.RUNNING or (
                    locked.owner and (locked.heartbeat_at or now) >= stale_before(now)):
                return ""  # its executor stops it, then rolls it back
            closing = {"by": locked.cancel_requested_by,
                       "reason": "rolled back; its executor had stopped"}
            append_event(locked, Kind.RUN_CANCELLED, payload=closing,
                         then=lambda seq: finish(status=State.CANCELLED, graph=locked.graph,
                                                 current=locked.state, now=now,
                                                 last_seq=seq, closing=closing))
            withdraw_questions(locked.id)
            # its stalled executor, should it wake, is fenced off as by a claim
            Run.objects.filter(id=locked.id).update(epoch=F("epoch") + 1)
        if undone.is_first:
            delete_run(locked)
            return DELETED
        before = [str(i) for i in locked.langgraph_runs.exclude(id=undone.id)
                  .order_by("-first_seq").values_list("id", flat=True)]
        waiting = langgraph_run_undo(thread_id=locked.thread_id, undone=str(undone.id),
                                     before=before, continued=undone.went_on_from == State.PAUSED)
        locked.events.filter(seq__gte=undone.first_seq).delete()
        locked.interrupts.filter(created_at__gte=undone.created_at).exclude(
            interrupt_id__in=waiting).delete()
        locked.interrupts.filter(interrupt_id__in=waiting).update(
            status=Interrupt.Status.PENDING, answer=None, answered_by=None,
            answered_by_name="", answered_at=None, answered_via="", checkpoint_id="",
            taken_up_at=None)
        undone.delete()
        LangGraphRun.objects.filter(id=before[0]).update(superseded_at=None)
        kept = locked.events.order_by("-seq")
        fields = roll_back(
            current=locked.state, to=undone.went_on_from or State.INTERRUPTED,
            last_seq=undone.first_seq - 1,
            current_node=kept.exclude(node="").values_list("node", flat=True).first() or "",
            calls=rollups_after(Run(), [dict(row) for row in kept.filter(
                kind=Kind.MODEL_FINISHED).values("kind", "payload")]))
        apply(locked.id, fields)
        apply_to(locked, fields)
    return ROLLED_BACK


def append_event(locked: Run, kind: str, *, then: Callable[[int], Fields] | None = None,
           **event: Any) -> int:
    """Append one event to the log of a run whose row this transaction holds, with the
    transition that goes with it: ``then(seq)`` (by default
    :func:`progress` to that seq)."""
    seq = next_seq(locked)
    RunEvent.objects.create(run=locked, seq=seq, kind=kind, **event)
    if then is not None:
        fields = then(seq)
        apply(locked.id, fields, before=locked)
    else:  # it moves on, as an execution's write moves a run on
        now = timezone.now()
        fields = progress(now=now, last_seq=seq)
        _written([_django_statements().progress([progress_move(locked, fields)], now)])
    apply_to(locked, fields)
    return seq


@overload
def lock_run(run_id: Any, *, must: Literal[True]) -> Run: ...
@overload
def lock_run(run_id: Any, *, where: Q | None = None) -> Run | None: ...
def lock_run(run_id: Any, *, must: bool = False, where: Q | None = None) -> Run | None:
    """The run's row, locked until this transaction ends, taken after its thread's row.

    Every transaction that writes a run and its thread takes the two in this order (the
    thread, then the run), as a thread's run decisions do (``lgserver``'s ``locked``), so
    two of them never wait on each other. None if there is no such run, or it does not
    meet ``where`` once locked (``must``: raise ``Run.DoesNotExist``).
    """
    thread_id = Run.objects.filter(id=run_id).values_list("conversation_id", flat=True).first()
    if thread_id is not None:
        Thread.objects.select_for_update().filter(id=thread_id).values_list("id").first()
    runs = Run.objects.select_for_update().filter(id=run_id)
    if where is not None:
        runs = runs.filter(where)
    return runs.get() if must else runs.first()


def set_thread_status(run_id: Any, status: str) -> None:
    """Give the run's thread ``status`` (a :data:`THREAD_STATUS` value) by
    :data:`SET_THREAD_STATUS`, from its latest run only."""
    uid = run_id if isinstance(run_id, uuid.UUID) else uuid.UUID(str(run_id))
    _written([_django_statements().thread_status(uid, status)])


def settle_thread(thread_id: Any) -> None:
    """A thread whose latest run was deleted takes the status of its latest remaining run
    (runs enqueued behind another aside), or is idle with none."""
    latest = Run.objects.filter(conversation_id=thread_id).latest_first().first()
    if latest is None:
        Thread.objects.filter(id=thread_id).update(status=Thread.Status.IDLE)
    else:
        set_thread_status(latest.id, thread_status_of(latest.state, latest.outcome))


def _ask_groups(interrupt: Interrupt, graph: str) -> None:
    """Record which groups answer a question just asked (its graph's declaration, or its
    own value's ``groups``), and its deadline with the times it brings."""
    try:
        spec: GraphSpec | None = get_graph(graph)
    except KeyError:  # no longer registered: the question's own value only
        spec = None
    declared = spec.question_groups if spec is not None else {}
    InterruptGroup.objects.bulk_create([
        InterruptGroup(interrupt=interrupt, name=name)
        for name in answer_groups(declared, interrupt.payload)])
    try:
        deadline = question_deadline(spec.question_deadlines if spec is not None else {},
                                     interrupt.payload)
    except (TypeError, ValueError, ArithmeticError) as exc:  # never fails the run
        logger.warning("question %s of run %s: its deadline is ignored: %s",
                       interrupt.interrupt_id, interrupt.run_id, exc)
        deadline = None
    if deadline is not None:
        fields = deadline_fields(deadline, asked_at=interrupt.created_at)
        Interrupt.objects.filter(pk=interrupt.pk).update(**fields)


def deadline_fields(deadline: QuestionDeadline, *, asked_at: datetime) -> dict[str, Any]:
    """An interrupt's deadline columns for ``deadline``, counted from ``asked_at``."""
    due = asked_at + timedelta(seconds=deadline.seconds)
    return {"deadline": dataclasses.asdict(deadline),
            "remind_at": (due - timedelta(seconds=deadline.remind_before)
                          if deadline.remind_before else None),
            "deadline_at": due,
            "expires_at": due + timedelta(seconds=deadline.escalate_for)}


def fail_held(run_id: Any, *, owner: str, error: tuple[str, str]) -> bool:
    """Fail a run ``owner`` still holds whose execution raised past its own handling (its
    closing write, say), so that it is not recovered into the same fault for ever; whether
    it was (another may have taken it, or it ended)."""
    with transaction.atomic():
        locked = lock_run(run_id, where=Q(owner=owner, state=State.RUNNING))
        if locked is None:
            return False
        _fail_locked(locked, error)
    return True


def _fail_locked(locked: Run, error: tuple[str, str], **payload: Any) -> None:
    """Fail a running run whose row this transaction holds: its ``run_failed`` event
    (``error``'s message, and ``payload``) and its questions withdrawn."""
    append_event(locked, Kind.RUN_FAILED, payload={"error": error[0], **payload},
                 then=lambda seq: finish(status=Run.State.FAILED, graph=locked.graph,
                                         current=locked.state, now=timezone.now(),
                                         last_seq=seq, error=error))
    withdraw_questions(locked.id)


class RunExhausted(Exception):
    """A run was to be recovered once more than ``PLANWATCH_RUN_MAX_ATTEMPTS`` allows:
    it was failed instead (its log and error say so)."""


def attempts_exhausted(run: Run) -> tuple[str, str] | None:
    """The error a running run fails with instead of being recovered once more (None: it
    may be): claimed ``PLANWATCH_RUN_MAX_ATTEMPTS`` times since it last stopped or wrote
    a checkpoint, each execution stopping without ending it."""
    limit = planwatch_setting("RUN_MAX_ATTEMPTS")
    if run.attempts < limit:
        return None
    last = run.attempt_error or ("none recorded: its executor stopped without a word "
                                 "(it died, or lost the database)")
    times = "once" if run.attempts == 1 else f"{run.attempts} times"
    return (f"the run was claimed {times} without getting on (no checkpoint "
            f"written since); PLANWATCH_RUN_MAX_ATTEMPTS is {limit}, so it is failed "
            f"instead of recovered again; the last error: {last}",
            run.attempt_error)


def release_failed(run_id: Any, *, owner: str, error: str) -> bool:
    """A run ``owner`` holds whose execution stopped on a database fault: let it go, the
    fault kept as its last error, so any executor (this one too) recovers it at once
    (:data:`TAKE` counts that attempt), and whether it was still ``owner``'s."""
    return bool(Run.objects.running().filter(id=run_id, owner=owner).update(
        owner="", attempt_error=error[:10_000]))


def withdraw_questions(run_id: Any) -> None:
    """The run's questions still pending are withdrawn (it failed or was cancelled)."""
    Interrupt.objects.filter(run_id=run_id, status=Interrupt.Status.PENDING).update(
        status=Interrupt.Status.CANCELLED)


def progress_move(run: Run, fields: Fields, rows: list[dict[str, Any]] | tuple[()] = ()
                  ) -> Fields:
    """A run's entry in :data:`PROGRESS`'s batch: where ``fields`` move it on (as
    :func:`progress` builds them), its other values as they are, and whether its ``rows``
    record a checkpoint (it got on: its attempts start again)."""
    return {"id": run.id, **{name: fields.get(name, getattr(run, name))
                             for name in ("current_node", "last_seq", *ROLLUPS)},
            "checkpointed": any(row.get("kind") == Kind.CHECKPOINT for row in rows)}


def execution_write(sql: Statements, run: Run, rows: list[dict[str, Any]],
                    current_node: str, final: dict[str, Any], now: datetime
                    ) -> tuple[list[Statement], Fields]:
    """The statements that write an executing run's ``rows`` with its progress, or with
    where it stops (``final``: status, output or error; whether the questions it leaves
    are withdrawn; ``answered``: an answer waits for it), on either path; and the fields
    the run takes."""
    last_seq = rows[-1]["seq"] if rows else None
    calls = rollups_after(run, rows)
    statements = [sql.insert([(run, rows, current_node)], now)] if rows else []
    status = final.get("status")
    if not status:
        fields = progress(now=now, last_seq=last_seq, current_node=current_node, calls=calls)
        return [*statements, sql.progress([progress_move(run, fields, rows)], now)], fields
    fields = stop(status=status, current=run.state, now=now, graph=run.graph,
                  last_seq=last_seq, current_node=current_node, output=final.get("output"),
                  error=final.get("error"), closing=closing_payload(status, rows),
                  calls=calls)
    if final.get("answered"):  # answered while it ran on: about to resume with it
        fields.update(answer(current=fields["state"]))
    if final.get("cancel_interrupts"):
        statements.append(sql.withdraw(run.id))
    return [*statements, *(statements_of(sql, run.id, fields) or ())], fields


def closing_payload(status: str, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The payload of the event among an execution's last ``rows`` that closes its log as
    ``status`` (``run_cancelled``…: the one its finish records), if there is one."""
    transition = states.ENDS.get(State(status)) if status in states.ENDS else None
    kinds = transition.events if transition is not None else ()
    return next((row.get("payload") for row in reversed(rows) if row["kind"] in kinds), None)


@database_sync_to_async
def awrite_orm(run: Run, rows: list[dict[str, Any]], current_node: str,
               final: dict[str, Any]) -> dict[str, Any]:
    """Write a run's events with its progress, or with where it stops, as
    :func:`execution_write` says, and the questions a paused run waits on (``final``'s
    ``pending``: get-or-created), in one transaction on Django's connection; the run's
    values as a doorbell tells them. The executor's write for a paused run, and before
    its fast path is open."""
    now = rows[0]["created_at"] if rows else timezone.now()
    pending = final.get("pending")
    with transaction.atomic():
        relax_commit()
        # the fence: the run is still this execution's (an answer recorded meanwhile waits
        # on the run's row)
        locked = lock_run(run.id)
        if locked is None or locked.epoch != run.epoch:
            raise Fence(run.id, run.epoch).lost()
        for item in pending or ():
            asked, new = Interrupt.objects.get_or_create(
                run_id=run.id, interrupt_id=item["interrupt_id"],
                defaults={k: item[k] for k in ("node", "namespace", "payload")},
            )
            if new:
                _ask_groups(asked, run.graph)
        if pending is not None:  # questions the graph no longer asks are withdrawn
            Interrupt.objects.filter(run_id=run.id, status=Interrupt.Status.PENDING).exclude(
                interrupt_id__in=[i["interrupt_id"] for i in pending]
            ).update(status=Interrupt.Status.CANCELLED)
            final = {**final, "answered": Interrupt.objects.unconsumed().filter(
                run_id=run.id).exists()}
        statements, fields = execution_write(_django_statements(), run, rows, current_node,
                                             final, now)
        _written(statements)
        values: dict[str, Any] = Run.objects.values(*SUMMARY_FIELDS, "state").get(id=run.id)
    if values.pop("state") == fields.get("state") or "state" not in fields:
        apply_to(run, fields)  # a stop refused (the run had ended) is not mirrored
    return values


# -- claims --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """An operator's answer, taken from the database to resume the graph with."""

    interrupt_id: str
    answer: Any
    answered_by: str
    node: str
    namespace: str
    answered_at: datetime | None = None
    """When the operator answered (the event is written later, when a run resumes)."""

    def event(self) -> dict[str, Any]:
        """The ``interrupt_answered`` event that records it in the run's log, at the
        moment of the answer."""
        return {
            "kind": Kind.INTERRUPT_ANSWERED, "node": self.node, "namespace": self.namespace,
            "at": self.answered_at,
            "payload": {"interrupt_id": self.interrupt_id, "answer": self.answer,
                        "answered_by": self.answered_by},
        }


@dataclass
class Claim:
    """A run this executor now holds: how it starts, its next seq, what it already saw."""

    run: Run
    kind: str
    """``run_started``, ``run_forked``, ``run_resumed`` or ``run_recovered``: the event the
    claim writes."""
    next_seq: int
    checkpoint_ids: list[str]
    answers: list[Answer]
    langgraph_run_ids: list[str]
    """The run's LangGraph runs, the current one first (:meth:`Run.langgraph_run_ids`):
    its checkpoints are those naming one of them (``run_id``)."""

    @property
    def langgraph_run_id(self) -> str:
        """The run's current LangGraph run, which the checkpoints it writes now name: the
        run's own id when it starts, the resume's or the continue's when it goes on."""
        return self.langgraph_run_ids[0]


def _driver_integrity_errors() -> tuple[type[Exception], ...]:
    """The drivers' own integrity errors (the fast path's connections are not Django's)."""
    errors: list[type[Exception]] = [sqlite3.IntegrityError]
    with contextlib.suppress(ImportError):
        import psycopg

        errors.append(psycopg.IntegrityError)
    return tuple(errors)


DRIVER_INTEGRITY_ERRORS = _driver_integrity_errors()


def sibling_running(run: Run) -> bool:
    """Whether another run of the run's thread executes (the run then waits its turn)."""
    return run.conversation_id is not None and Run.objects.running().filter(
        conversation_id=run.conversation_id).exclude(id=run.id).exists()


@database_sync_to_async
def aclaim_orm(run_id: uuid.UUID, owner: str, mode: str) -> Claim | None:
    """Take any claimable run (start, resume, recover, continue) through the ORM, or None;
    :class:`RunExhausted` once a run that was to be recovered has been failed instead."""
    taken = _claim_orm(run_id, owner, mode)
    if isinstance(taken, RunExhausted):  # raised once its failure committed
        raise taken
    return taken


def _claim_orm(run_id: uuid.UUID, owner: str, mode: str) -> Claim | RunExhausted | None:
    """:func:`aclaim_orm`'s transaction."""
    now = timezone.now()
    stale = stale_before(now)
    free = free_q(owner=owner, stale=stale)
    with transaction.atomic():
        relax_commit()  # a lost claim leaves the run queued: recovery dispatches it again
        run = lock_run(run_id, where=free)
        if run is None:
            return None
        answers: list[Answer] = []
        if run.state != State.RUNNING and sibling_running(run):
            return None  # dispatched again when that run stops
        if run.allows(states.START) and mode == "start":
            if run.waits_for_id is not None and not _take_turn(run):
                return None  # enqueued behind a run of its thread that has not stopped
            transition = states.START
            kind = Kind.RUN_FORKED if run.parent_id else Kind.RUN_STARTED
        elif run.allows(states.GO_ON) and mode == "continue":
            transition, kind = states.GO_ON, Kind.RUN_RESUMED
        elif run.allows(states.RECOVER) and (run.owner != owner or _dropped(run, mode, stale)):
            exhausted = attempts_exhausted(run)
            if exhausted is not None:  # it would stop the same way again: it ends here
                _fail_locked(run, exhausted, attempts=run.attempts,
                             last_error=run.attempt_error)
                return RunExhausted(exhausted[0])
            transition = states.RECOVER
            kind = Kind.RUN_RECOVERED  # its executor died (stale heartbeat)
        elif run.allows(states.RESUME):
            answers = _take_answers(run)
            if not answers:
                return None  # nothing to resume with yet
            transition, kind = states.RESUME, Kind.RUN_RESUMED
        else:
            return None
        fields = claim(transition, current=run.state, owner=owner, now=now)
        attempts = attempts_after(run)
        apply(run.id, fields)
        apply_to(run, fields)
        run.epoch += 1  # TAKE moved it on: this execution's fence
        run.attempts = attempts  # and counted the attempt
        if kind in (Kind.RUN_STARTED, Kind.RUN_FORKED):  # a fresh run: no checkpoints yet
            return Claim(run, kind, next_seq(run), [], answers, [str(run.id)])
        checkpoints = list(
            run.events.filter(kind=Kind.CHECKPOINT).values_list("checkpoint_id", flat=True)
        )
    return Claim(run, kind, next_seq(run), checkpoints, answers, run.langgraph_run_ids())


def _dropped(run: Run, mode: str, stale: datetime) -> bool:
    """Whether a run its claimer holds is one it let fall (a recovery of its own run, no
    longer heart-beating: its execution stopped on a database fault and could not let it
    go), not one it executes; its executor never asks while it executes the run."""
    return mode == "recover" and run.heartbeat_at is not None and run.heartbeat_at < stale


def attempts_after(run: Run) -> int:
    """The run's attempts once claimed (as :data:`TAKE` counts them): one more for a
    recovery (it was running), else the first."""
    return run.attempts + 1 if run.state == State.RUNNING else 1


def _take_turn(run: Run) -> bool:
    """Whether an enqueued run may start: the run it waits for has stopped (ended, or
    waits for an answer or at a breakpoint, with nothing about to resume it). It then
    goes on from that run's last checkpoint, as read now."""
    ahead = run.waits_for
    if ahead is not None:
        if Run.objects.busy().filter(id=ahead.id).exists():
            return False
        last = ahead.last_root_checkpoint()
        if last and not run.forked_from_checkpoint:
            run.forked_from_checkpoint = last
            Run.objects.filter(id=run.id).update(forked_from_checkpoint=last)
    if run.parent_id and not run.forked_from_checkpoint:  # it never wrote one: start afresh
        run.parent_id = None
        Run.objects.filter(id=run.id).update(parent=None)
    return True


def _take_answers(run: Run) -> list[Answer]:
    """Answered interrupts not yet fed to the graph; mark them taken up."""
    rows = list(Interrupt.objects.unconsumed().filter(run=run).select_related("answered_by"))
    Interrupt.objects.filter(pk__in=[r.pk for r in rows]).take_up(run.last_root_checkpoint())
    return [Answer(r.interrupt_id, r.answer, r.answerer_name, r.node, r.namespace,
                   r.answered_at) for r in rows]


def release_runs(run_id: uuid.UUID | None = None, *, owner: str) -> int:
    """Release the run ``owner`` holds (every run it holds, without ``run_id``) for
    another executor to take over (:func:`release`); how many were released."""
    held = Run.objects.running().filter(owner=owner)
    if run_id is not None:
        held = held.filter(id=run_id)
    return held.update(**orm_fields(release()))


arelease = database_sync_to_async(release_runs)


@database_sync_to_async
def atake_breakpoints(run_id: uuid.UUID) -> Run:
    """The run's breakpoints as an operator just set them; their change is taken."""
    Run.objects.filter(id=run_id).update(breakpoints_changed=False)
    return Run.objects.only("interrupt_before", "interrupt_after", "step_once").get(id=run_id)


@database_sync_to_async
def acancelled_by(run_id: uuid.UUID) -> str:
    """Who asked to cancel the run."""
    by: str = Run.objects.values_list("cancel_requested_by", flat=True).get(id=run_id)
    return by


# -- the executor's fast path ----------------------------------------------------------------


class RunStore:
    """The executor's writes of its runs, next to the checkpointer (see the module)."""

    def __init__(self, handle: SaverHandle | None, *, postgres: bool, pool: Any = None) -> None:
        # AsyncSqliteSaver's connection and lock, on SQLite (the base class has neither)
        self.saver: Any = handle.saver if handle is not None else None
        self.postgres = postgres
        self.pool = pool
        self.sql = Statements(postgres)

    @classmethod
    async def aopen(cls, handle: SaverHandle, *, postgres: bool, pool_size: int) -> RunStore:
        """The store for an open saver (on PostgreSQL with its own pool)."""
        if not postgres:
            return cls(handle, postgres=False)
        from psycopg.types.string import TextLoader
        from psycopg_pool import AsyncConnectionPool

        from config import pgpool

        async def configure(conn: Any) -> None:
            # JSON arrives as text, as on Django's connections: Django's fields convert it
            conn.adapters.register_loader("jsonb", TextLoader)
            if relaxed_commits():
                await conn.execute("SET synchronous_commit TO OFF")
            # (one statement per write here, but a connection of the executor's all the same)
            await aend_abandoned_transactions(conn)

        # statements are prepared at once: there are a handful, run thousands of times, and
        # the server shares the machine's cores with the graphs
        pool = AsyncConnectionPool(
            postgres_conninfo(), min_size=1, max_size=pool_size, configure=configure,
            kwargs={"autocommit": True, "prepare_threshold": 0}, open=False,
            # a connection the server dropped (a restart, pg_terminate_backend) is found
            # out on checkout and replaced, not used for a write that would then fail
            check=pgpool.acheck,
        )
        await pool.open()
        return cls(handle, postgres=True, pool=pool)

    async def aclose(self) -> None:
        """Close the store's own pool, if it has one."""
        if self.pool is not None:
            await self.pool.close()

    @contextlib.asynccontextmanager
    async def lock(self) -> AsyncIterator[None]:
        """Hold SQLite's one writer (the saver's connection lock); free on PostgreSQL."""
        if self.postgres:
            yield
        else:
            async with self.saver.lock:
                yield

    # -- transitions ---------------------------------------------------------------------

    async def aclaim(self, run_id: uuid.UUID, *, owner: str, mode: str) -> Claim | None:
        """Take the run for ``owner``, or return None if it is not ``owner``'s to run now.

        A fresh run (the common case) in one conditional UPDATE on the store's own
        connection; anything else (a resume, a recovery, a fork, an enqueued run) through
        the ORM, which also hands over the answers the graph resumes with.
        """
        if mode == "start":
            try:
                now = timezone.now()
                run = await self.aclaim_queued(run_id, owner=owner, now=now,
                                               stale=stale_before(now))
            except DRIVER_INTEGRITY_ERRORS:  # another run of its thread was claimed meanwhile
                return None
            if run is not None:
                return Claim(run, Kind.RUN_STARTED, next_seq(run), [], [], [str(run.id)])
        try:
            return await aclaim_orm(run_id, owner, mode)
        except IntegrityError:  # another run of its thread was claimed meanwhile: it waits
            return None

    async def aclaim_queued(self, run_id: uuid.UUID, *, owner: str, now: datetime,
                            stale: datetime) -> Run | None:
        """Take a queued run in one conditional UPDATE; None if it is not queued and free
        (heart-beating since ``stale``)."""
        fields = claim(states.START, current=State.QUEUED, owner=owner, now=now)
        _, params = self.sql.take(run_id, fields)  # CLAIM is TAKE with conditions
        params = [*params, owner, self.sql.prep("heartbeat_at", stale)]
        # the thread's status first: the claim's RETURNING is the write's answer
        row = await self._aexecute([*self.sql.thread(run_id, fields),
                                    (self.sql.claim_sql, params)], returning=True)
        if row is None:
            return None
        run = self.sql.run(run_id, row)
        apply_to(run, fields)
        run.attempts = 1  # TAKE counted its first
        return run

    async def aheartbeat(self, run_ids: list[uuid.UUID], *, owner: str
                         ) -> tuple[set[uuid.UUID], set[uuid.UUID], set[uuid.UUID]]:
        """Prove ``owner`` alive for its runs; return those an operator asked to cancel,
        those whose breakpoints an operator changed, and those ``owner`` still holds.

        On the store's own connection, on the executor's loop: through the ORM it waited
        for asgiref's one shared thread (every executor and reaper call of the process
        queues there), and under load a live run's heartbeat landed after
        ``STALE_AFTER_SECONDS``: another executor recovered the run while this one still
        ran it, and both wrote its first events (``runevent_run_seq_unique``).
        """
        rows = await self._aexecute([self.sql.heartbeat(
            run_ids, owner, heartbeat(now=timezone.now()))], returning="all")
        cancel: set[uuid.UUID] = set()
        rebreak: set[uuid.UUID] = set()
        held: set[uuid.UUID] = set()
        for run_id, cancelled, changed in rows:
            run_id = run_id if isinstance(run_id, uuid.UUID) else uuid.UUID(run_id)
            held.add(run_id)
            if cancelled:
                cancel.add(run_id)
            if changed:
                rebreak.add(run_id)
        return cancel, rebreak, held

    async def aprogress(self, batches: list[Batch], *, now: datetime) -> list[dict[str, Any]]:
        """Insert the rows of several running runs and record their progress, atomically.

        One statement for every run an executor has rows of, whatever their number.
        Returns each run's values as a doorbell tells them, in the order of ``batches``.
        """
        moves = [progress_move(run, progress(
            now=now, last_seq=rows[-1]["seq"] if rows else None, current_node=node,
            calls=rollups_after(run, rows)), rows) for run, rows, node in batches]
        statements: list[Statement] = []
        if any(rows for _, rows, _ in batches):
            statements.append(self.sql.insert(batches, now))
        statements.append(self.sql.progress(moves, now))
        with instruments.event_write(sum(len(rows) for _, rows, _ in batches)):
            await self._aexecute(statements, fence=[run for run, _, _ in batches])
        values = []
        for (run, _, _), moved in zip(batches, moves, strict=True):
            apply_to(run, {name: moved[name] for name in ("last_seq", *ROLLUPS)})
            values.append({**{name: getattr(run, name) for name in SUMMARY_FIELDS},
                           "current_node": moved["current_node"],
                           "last_seq": moved["last_seq"], "finished_at": None})
        return values

    async def astop(self, run: Run, rows: list[dict[str, Any]], *, current_node: str,
                    now: datetime, final: dict[str, Any]) -> dict[str, Any]:
        """Insert a run's last ``rows`` together with where it stops, atomically.

        ``final`` (as :meth:`~dashboard.runs.execution.EventWriter.afinish` builds it) gives
        the status (paused or final), output or error, the questions a paused run waits on
        (``pending``: through Django's connection, which get-or-creates them) and whether
        the questions it leaves are withdrawn. Returns the run's values as a doorbell
        tells them.
        """
        if final.get("pending") is not None:
            async with self.lock():
                with instruments.event_write(len(rows)):
                    return await awrite_orm(run, rows, current_node, final)
        statements, fields = execution_write(self.sql, run, rows, current_node, final, now)
        with instruments.event_write(len(rows)):
            await self._aexecute(statements, fence=[run], stop="state" in fields)
        apply_to(run, fields)
        return {name: getattr(run, name) for name in SUMMARY_FIELDS}

    async def aapply(self, run_id: uuid.UUID, fields: Fields) -> None:
        """Write a claim's or a stop's ``fields`` to one run (and its thread) on the fast
        path, by the statement the ORM path runs too."""
        statements = statements_of(self.sql, run_id, fields)
        assert statements is not None, f"not a claim or a stop: {sorted(fields)}"
        await self._aexecute(statements)

    async def _aexecute(self, statements: list[Statement], *,
                        returning: bool | Literal["all"] = False,
                        fence: list[Run] | None = None, stop: bool = False) -> Any:
        """Run ``statements`` atomically; the last one's first row if ``returning``
        (``"all"``: all its rows). With a ``fence`` (the runs an execution writes), the
        write commits only if each run's epoch is still the one its claim left
        (:data:`FENCE`); else nothing is written and :class:`RunLost` is raised.

        PostgreSQL: all but the last become data-modifying CTEs of the last (each runs
        exactly once, whether referenced or not), so the write is a single statement.
        SQLite: each statement is one hop to aiosqlite's thread, then one for the commit.
        """
        if fence:
            statements = [*statements, self.sql.fence(fence, stop=stop)]
        if self.postgres:
            head = [f"w{i} AS ({sql})" for i, (sql, _) in enumerate(statements[:-1])]
            sql = (f"WITH {', '.join(head)} " if head else "") + statements[-1][0]
            params = [p for _, ps in statements for p in ps]
            async with self.pool.connection() as conn:
                try:
                    cur = await conn.execute(sql, params)
                except Exception as exc:
                    if fence and getattr(exc, "sqlstate", None) == "PWF01":
                        raise RunLost(str(exc).strip()) from exc
                    raise
                if returning == "all":
                    return await cur.fetchall()
                return await cur.fetchone() if returning else None
        async with self.saver.lock:
            conn = self.saver.conn
            try:
                for sql, params in statements:
                    rows = await conn.execute_fetchall(sql, params)
                if fence and next(iter(rows))[0] < len(fence):
                    raise RunLost(f"a run of {', '.join(str(r.id) for r in fence)} is no "
                                  "longer held at its epoch: another executor took it over; "
                                  "this execution stops")
            except BaseException:
                await conn.rollback()
                raise
            await conn.commit()
            return list(rows) if returning == "all" else next(iter(rows), None)
