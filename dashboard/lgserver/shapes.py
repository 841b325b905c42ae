"""Assistants, threads, runs and thread states as LangGraph's server shapes them.

Reads only: the state of a thread is read through LangGraph itself (``get_state`` on the
graph compiled with the database's sync saver), so ``next``, ``tasks`` and interrupts are
what LangGraph says they are; a run paused at its budget adds the one interrupt
Planwatch shows for that pause (:mod:`dashboard.budget_reviews`), never written into the
checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db.models import OuterRef, Subquery
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import StateSnapshot

from dashboard.budget_reviews import budget_interrupt
from dashboard.checkpoints import config_of, graph_for
from dashboard.models import LangGraphRun, Run, Thread
from dashboard.runs.budgets import pause_of
from dashboard.runs.jsonsafe import to_jsonable
from dashboard.runs.outcome import outcome_message
from planner.questions import review_request
from planner.registry import GraphSpec, get_graph

STARTED_AT = datetime.now(UTC)
"""When this process registered its graphs: an assistant's created_at."""

def iso(value: datetime | None) -> str | None:
    """A timestamp as LangGraph's server writes it."""
    return value.isoformat() if value else None


def assistant(spec: GraphSpec) -> dict[str, Any]:
    """The one assistant of a registered graph: its id and its graph id are the graph's name."""
    return {
        "assistant_id": spec.name, "graph_id": spec.name, "name": spec.name,
        "description": spec.description, "version": spec.version,
        "config": {}, "context": {},
        "metadata": {"title": spec.title, "tags": list(spec.tags), "created_by": "system"},
        "created_at": iso(STARTED_AT), "updated_at": iso(STARTED_AT),
    }


def busy(run: Run | None) -> bool:
    """Whether the run executes, waits to, or is about to resume (:meth:`Run.is_busy`)."""
    return run is not None and run.is_busy()


def latest_runs(threads: Sequence[Thread]) -> dict[Any, Run]:
    """Each thread's ``Thread.latest_run`` (threads with none left out), in two queries."""
    latest = Subquery(Run.objects.filter(conversation=OuterRef("pk")).latest_first()
                      .values("id")[:1])
    ids = (Thread.objects.filter(id__in=[t.id for t in threads]).annotate(latest=latest)
           .values_list("latest", flat=True))
    runs = Run.objects.filter(id__in=[i for i in ids if i is not None])
    return {run.conversation_id: run for run in runs}


def outcome_metadata(run: Run | None) -> dict[str, Any]:
    """``{"planwatch_outcome": {"outcome", "reason"}}`` of a finished run (as stored when it
    stopped), for the metadata of its LangGraph run and its thread; {} for another."""
    if run is None or not run.outcome:
        return {}
    return {"planwatch_outcome": {"outcome": run.outcome, "reason": run.outcome_reason}}


def outcome_said(run: Run | None) -> dict[str, Any] | None:
    """The chat message that tells how ``run`` ended where no node of its graph was left to
    say it (it failed, or a budget stopped it: :func:`dashboard.runs.outcome.outcome_message`,
    from the outcome stored when it stopped), as JSON with an id of its own; None for
    another run."""
    if run is None or not run.is_finished:
        return None
    text = outcome_message(outcome=run.outcome, reason=run.outcome_reason)
    if not text:
        return None
    return AIMessage(content=text, id=f"planwatch-outcome-{run.id}").model_dump()


def transcript_channel(graph: str, values: Any) -> str:
    """The channel of ``values`` chat clients read as the conversation: the graph's
    declared ``messages_channel``, else ``messages`` if it holds a list ("" if none)."""
    try:
        channel = get_graph(graph).messages_channel
    except KeyError:
        channel = ""
    channel = channel or "messages"
    return channel if isinstance(values, dict) and isinstance(values.get(channel), list) \
        else ""


def with_outcome(values: Any, run: Run | None) -> Any:
    """``values`` (the state a finished ``run`` ended with) with :func:`outcome_said` last
    in its transcript, where it has one: a chat client (Agent Chat UI reads the thread's
    messages) shows how the run ended. Not written to the checkpoint: a retry or a continue
    goes on from the state as the run left it."""
    said = outcome_said(run)
    channel = transcript_channel(run.graph, values) if said and run else ""
    if not channel or not said:
        return values
    transcript = values[channel]
    if transcript and isinstance(transcript[-1], dict) and transcript[-1].get("id") == said["id"]:
        return values
    return {**values, channel: [*transcript, said]}


def run(langgraph_run: LangGraphRun) -> dict[str, Any]:
    """A LangGraph run as LangGraph's server shapes it: its own id, creation and status
    (its ``Run``'s while it is the current one), the rest its ``Run``'s."""
    run = langgraph_run.run
    updated: datetime | None
    if langgraph_run.is_current:
        updated = max(run.finished_at or run.heartbeat_at or run.started_at
                      or run.created_at, langgraph_run.created_at)
    else:
        updated = langgraph_run.superseded_at
    return {
        "run_id": str(langgraph_run.id), "thread_id": str(run.conversation_id),
        "assistant_id": str(run.assistant_id) if run.assistant_id else run.graph,
        "status": langgraph_run.langgraph_status,
        "created_at": iso(langgraph_run.created_at),
        "updated_at": iso(updated),
        # LangGraph's status stays LangGraph's (a graph that returned: success, whose
        # stream ended without an error); the outcome stored when it stopped is read beside
        # it (README, "Your own graphs": a failed plan's thread is in error)
        "metadata": {**(run.metadata or {}),
                     **(outcome_metadata(run) if langgraph_run.is_current else {})},
        "multitask_strategy": run.multitask_strategy or "reject",
        # a resume or a continue had no input of its own
        "kwargs": {"input": run.input if langgraph_run.is_first else None,
                   "interrupt_before": run.interrupt_before,
                   "interrupt_after": run.interrupt_after},
    }


def checkpoint_ref(thread_id: str, config: RunnableConfig | None) -> dict[str, Any] | None:
    """``{thread_id, checkpoint_ns, checkpoint_id}`` under the API's thread id."""
    if not config:
        return None
    conf = config.get("configurable") or {}
    return {"thread_id": thread_id, "checkpoint_ns": conf.get("checkpoint_ns", ""),
            "checkpoint_id": conf.get("checkpoint_id"), "checkpoint_map": None}


def offered(graph: str, value: Any) -> Any:
    """A question as LangGraph's clients are offered it: a graph that declares
    ``review_questions`` offers its questions in the standard interrupt shapes too
    (:func:`planner.questions.review_request`), beside their own keys."""
    try:
        spec = get_graph(graph)
    except KeyError:
        return value
    if spec.review_questions and isinstance(value, Mapping) and "prompt" in value:
        return {**value, **review_request(value)}
    return value


def interrupt(item: Any, graph: str = "") -> dict[str, Any]:
    """A LangGraph ``Interrupt`` as JSON (offered as ``graph`` offers its questions)."""
    value = to_jsonable(getattr(item, "value", None))
    return {"value": offered(graph, value) if graph else value, "id": getattr(item, "id", "")}


def state(thread_id: str, snap: StateSnapshot, graph: str = "") -> dict[str, Any]:
    """A ``StateSnapshot`` as LangGraph's server shapes a thread state."""
    tasks = [
        {"id": t.id, "name": t.name, "error": str(t.error) if t.error else None,
         "interrupts": [interrupt(i, graph) for i in t.interrupts],
         # a subgraph's task: its checkpoint, or (``subgraphs=true``) its whole state
         "checkpoint": checkpoint_ref(thread_id, t.state) if isinstance(t.state, dict)
         else None,
         "state": state(thread_id, t.state, graph) if isinstance(t.state, StateSnapshot)
         else None,
         "result": to_jsonable(t.result) if t.result is not None else None}
        for t in snap.tasks
    ]
    return {
        "values": to_jsonable(snap.values), "next": list(snap.next),
        "checkpoint": checkpoint_ref(thread_id, snap.config),
        "metadata": to_jsonable(dict(snap.metadata or {})),
        "created_at": snap.created_at,
        "parent_checkpoint": checkpoint_ref(thread_id, snap.parent_config),
        "tasks": tasks,
        "interrupts": [interrupt(i, graph) for i in snap.interrupts],
    }


def empty_state(thread_id: str) -> dict[str, Any]:
    """The state of a thread no run has written to yet."""
    return {"values": {}, "next": [], "checkpoint": None, "metadata": {}, "created_at": None,
            "parent_checkpoint": None, "tasks": [], "interrupts": []}


def run_state(run: Run | None, thread_id: str, checkpoint_id: str | None = None, *,
              subgraphs: bool = False, graph: Any = None) -> dict[str, Any]:
    """The state of the thread ``run`` belongs to (its newest checkpoint, or at
    ``checkpoint_id``), read through ``graph`` (the run's graph on an open saver) or one
    opened for it; with ``subgraphs``, each subgraph task's own state too."""
    if run is None:
        return empty_state(thread_id)
    if graph is None:
        with graph_for(run.graph) as opened:
            return run_state(run, thread_id, checkpoint_id, subgraphs=subgraphs, graph=opened)
    snap = graph.get_state(config_of(run, checkpoint_id), subgraphs=subgraphs)
    if not snap.config:
        return empty_state(thread_id)
    found = state(thread_id, snap, run.graph)
    if not checkpoint_id:  # the state the run ended with: how it ended, said last
        found["values"] = with_outcome(found["values"], run)
        found = with_budget_pause(found, run)
    return found


def with_budget_pause(found: dict[str, Any], run: Run) -> dict[str, Any]:
    """A thread's current state with the interrupt of its run's budget pause, if the run
    waits at one: on the task it goes on with (LangGraph's ``tasks[].interrupts``) and in
    ``interrupts``, as a question's would be."""
    pause = pause_of(run)
    if pause is None or not found["tasks"]:
        return found
    pending = budget_interrupt(run.id, pause)
    first, *rest = found["tasks"]
    return {**found, "tasks": [{**first, "interrupts": [*first["interrupts"], pending]},
                               *rest],
            "interrupts": [*found["interrupts"], pending]}


def threads(page: Sequence[Thread]) -> list[dict[str, Any]]:
    """Threads as LangGraph's server shapes them, for a page of a search: their latest
    runs read together, their states through one saver per graph."""
    latest = latest_runs(page)
    states: dict[Any, dict[str, Any]] = {}
    for name in {run.graph for run in latest.values()}:
        with graph_for(name) as graph:
            for key, run in latest.items():
                if run.graph == name:
                    states[key] = run_state(run, str(key), graph=graph)
    return [thread(item, latest=latest.get(item.id), current=states.get(item.id, {}))
            for item in page]


def thread(thread: Thread, *, latest: Run | None = None,
           current: dict[str, Any] | None = None) -> dict[str, Any]:
    """A thread as LangGraph's server shapes it (with its state's values and interrupts,
    read here unless ``current`` gives them)."""
    if current is None:
        latest = latest if latest is not None else thread.latest_run()
        current = run_state(latest, str(thread.id)) if latest else None
    interrupts: dict[str, list[dict[str, Any]]] = {}
    for task in (current or {}).get("tasks", ()):
        if task["interrupts"]:
            interrupts[task["id"]] = task["interrupts"]
    return {
        "thread_id": str(thread.id), "created_at": iso(thread.created_at),
        "updated_at": iso(max(thread.updated_at, latest.created_at) if latest
                          else thread.updated_at),
        "metadata": {**(thread.metadata or {}),
                     **({"graph_id": thread.graph, "assistant_id": thread.graph}
                        if thread.graph else {}), **outcome_metadata(latest)},
        "status": thread.status,
        "values": (current or {}).get("values", {}),
        "interrupts": interrupts,
    }


def history(thread_obj: Thread, *, limit: int, before: str | None = None,
              checkpoint_id: str | None = None) -> list[dict[str, Any]]:
    """The thread's states, newest first: its one checkpoint thread, every branch (a run
    from a past checkpoint goes on from it), as LangGraph's server lists them; from
    ``checkpoint_id`` on, or those before ``before``."""
    held = thread_obj.runs.order_by("-created_at").first()
    if held is None:
        return []
    out: list[dict[str, Any]] = []
    with graph_for(held.graph) as graph:
        if checkpoint_id:
            first = graph.get_state(config_of(held, checkpoint_id))
            if not first.config:
                return []
            out.append(state(str(thread_obj.id), first, held.graph))
            before = checkpoint_id
        if limit > len(out):
            upto = config_of(held, before) if before else None
            for snap in graph.get_state_history(config_of(held), before=upto,
                                                limit=limit - len(out)):
                out.append(state(str(thread_obj.id), snap, held.graph))
                if not before and len(out) == 1:  # the newest: how its run ended, said last
                    out[0]["values"] = with_outcome(out[0]["values"],
                                                    thread_obj.latest_run())
    return out[:limit]
