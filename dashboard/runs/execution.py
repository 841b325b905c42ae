"""Executing one claimed run, in three steps: begin, stream, outcome.

:func:`aexecute` takes a :class:`~dashboard.runs.store.Claim` that the loop host
(:mod:`~dashboard.runs.execute`) holds: *begin* records the claim's event and picks what
the graph is fed (the input, the answers, a fork's copied checkpoint, or nothing to go on
from the last checkpoint); *stream* runs LangGraph's stream, translating each part
(:mod:`~dashboard.runs.translate`) and having it written behind
(:mod:`~dashboard.runs.record`), until the stream ends or an operator's request stops it
at a node boundary, and says which as a :class:`Stop` value; *outcome* has
:mod:`~dashboard.runs.finish` record where the run stands, returned as an :class:`Outcome`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from dashboard.models import Run, RunEvent
from dashboard.runs import debugging, finish
from dashboard.runs.conf import planwatch_setting
from dashboard.runs.orm import database_sync_to_async
from dashboard.runs.record import EventWriter, track
from dashboard.runs.savers import CheckpointWriteFailed, WriteWatch
from dashboard.runs.store import Claim, atake_breakpoints
from dashboard.runs.translate import STREAM_MODES, StreamTranslator
from planner.registry import get_graph

if TYPE_CHECKING:
    from dashboard.runs.modelcalls import ModelCallRecorder

logger = logging.getLogger("planwatch.runs")

Kind = RunEvent.Kind


@dataclass
class Requests:
    """What operators asked of a run while it executes; read at node boundaries."""

    cancel: bool = False
    """Stop the run (it is cancelled)."""
    breakpoints: bool = False
    """Take the run's new breakpoints and go on."""


class Stop(enum.Enum):
    """Why one stream of the graph stopped."""

    END = "end"  # the stream ran out: the graph ended, waits for answers, or hit a breakpoint
    CANCEL = "cancel"  # an operator cancelled the run
    BREAKPOINTS = "breakpoints"  # an operator changed the run's breakpoints


class Outcome(enum.Enum):
    """Where an execution left its run."""

    SUCCEEDED = "succeeded"  # the graph reached its end
    PAUSED = "paused"  # the graph waits for answers (they may have arrived meanwhile)
    HALTED = "halted"  # a breakpoint or a step stopped the graph
    CANCELLED = "cancelled"  # an operator cancelled it
    FAILED = "failed"  # a node raised, or the executor could not go on


@dataclass(frozen=True)
class Breakpoints:
    """Where an execution pauses: before or after these nodes (``*``: every node)."""

    before: list[str]
    after: list[str]
    step: bool = False
    """One super-step, then pause (LangGraph's ``interrupt_after="*"`` for this execution)."""

    @classmethod
    def of(cls, run: Run) -> Breakpoints:
        """The breakpoints stored on ``run``."""
        step = bool(run.step_once)
        return cls(list(run.interrupt_before or ()),
                   ["*"] if step else list(run.interrupt_after or ()), step)

    @classmethod
    async def aread(cls, run_id: uuid.UUID) -> Breakpoints:
        """The run's breakpoints as an operator just set them (and their change taken)."""
        return cls.of(await atake_breakpoints(run_id))

    def __bool__(self) -> bool:
        return bool(self.before or self.after)

    @staticmethod
    def for_langgraph(nodes: list[str]) -> str | list[str] | None:
        """Node names as ``astream`` takes them: ``"*"`` itself (a list holding "*" would
        match no node), the names, or None for none."""
        if "*" in nodes:
            return "*"
        return nodes or None

    def payload(self) -> dict[str, Any]:
        """How the event log records them."""
        return {"before": self.before, "after": self.after, "step": self.step}

    def stopped_after(self, node: str) -> str:
        """``node`` if the pause came after it (a step, or a breakpoint after it), else ""."""
        return node if node and (self.step or "*" in self.after or node in self.after) else ""


@database_sync_to_async
def aparent_thread(run: Run) -> str:
    """The checkpoint thread of the run ``run`` was forked from."""
    assert run.parent_id is not None
    thread: str = Run.objects.values_list("thread_id", flat=True).get(id=run.parent_id)
    return thread


class Host(Protocol):
    """What an execution needs of the loop host that holds its claim."""

    owner: str
    writes: set[asyncio.Task[None]]

    async def agraph(self, graph_name: str) -> tuple[Any, WriteWatch]:
        """The compiled graph, with a saver instance for one run, and that saver's watch
        of its checkpoint writes."""


async def aexecute(claim: Claim, *, host: Host, writer: EventWriter,
                   calls: ModelCallRecorder,
                   requests: Requests) -> Outcome:
    """Stream a claimed run's graph until it pauses, ends, fails or is cancelled.

    ``writer`` records the run's events, ``calls`` (a LangChain callback handler) its
    model calls; both are the host's to make, on what it shares between runs.
    """
    run = claim.run
    translator = StreamTranslator(seen_checkpoints=set(claim.checkpoint_ids))
    config = _config(run.configurable, run.thread_id, calls,
                     run.recursion_limit or planwatch_setting("MAX_RECURSION_LIMIT"))
    breaks = Breakpoints.of(run)
    try:
        spec = get_graph(run.graph)
        graph, watch = await host.agraph(run.graph)
        payload = await _abegin(claim, graph, config, writer, owner=host.owner)
        stop, breaks = await _astream(graph, payload, config, breaks, writer, translator,
                                      requests, watch)
        state = None
        if stop is Stop.END:
            # the node that paused (ask_user, say) started after the last checkpoint
            writer.current_node = translator.current_node
            # a run that raised nothing ended in the last root checkpoint it streamed (the
            # saver's read is needed for the questions a paused run waits on, and to learn
            # whether a breakpoint stopped it)
            paused = translator.interrupts or translator.root_values is None or bool(breaks)
            state = await graph.aget_state(config) if paused else None
    except asyncio.CancelledError:
        await asyncio.shield(track(host.writes, writer.aflush()))
        raise
    except Exception as exc:
        logger.exception("run %s failed", run.id)
        await finish.afail(writer, exc)
        return Outcome.FAILED
    if stop is Stop.CANCEL:
        await finish.acancel(writer)
        return Outcome.CANCELLED
    if finish.is_paused(state):
        await finish.apause(writer, state=state, translator=translator)
        return Outcome.PAUSED
    if state is not None and state.next:  # a breakpoint (or a step) stopped the graph
        await finish.ahalt(writer, state=state, translator=translator,
                           after=breaks.stopped_after(translator.last_root_node))
        return Outcome.HALTED
    values = state.values if state is not None else translator.root_values
    await finish.asucceed(writer, spec=spec, values=values)
    return Outcome.SUCCEEDED


def _config(configurable: dict[str, Any] | None, thread_id: str,
            calls: ModelCallRecorder, recursion_limit: int) -> RunnableConfig:
    """The graph's config: a client's configurable values, Planwatch's thread, the run's
    recursion limit (start, resume and recovery alike), and every model call of the graph,
    whoever makes it, reporting to the run's log."""
    return {"configurable": {**(configurable or {}), "thread_id": thread_id},
            "recursion_limit": recursion_limit,
            "callbacks": [calls] if planwatch_setting("MODEL_CALLS") else []}


async def _abegin(claim: Claim, graph: Any, config: RunnableConfig, writer: EventWriter,
                  *, owner: str) -> Any:
    """Record the claim's event (and the answers it took); return what to feed the graph."""
    run = claim.run
    writer.add({"kind": claim.kind, "payload": _first_payload(claim, owner)})
    if claim.answers:
        for answer in claim.answers:
            writer.add(answer.event())
        return Command(resume={a.interrupt_id: a.answer for a in claim.answers})
    if claim.kind == Kind.RUN_FORKED:
        await _afork(graph, claim)
        # go on from the copied (and edited) checkpoint, with the thread's next input if it
        # has one (LangGraph's server API's next run on a thread)
        return (run.fork_edit or {}).get("input")
    if claim.kind == Kind.RUN_STARTED:
        return run.input
    return None  # recover or continue: from the last checkpoint


def _first_payload(claim: Claim, owner: str) -> dict[str, Any]:
    """The payload of the claim's event: who executes it (and, for a fork, from where)."""
    run = claim.run
    payload: dict[str, Any] = {"owner": owner}
    if claim.kind == Kind.RUN_FORKED:
        payload.update(parent=str(run.parent_id), checkpoint_id=run.forked_from_checkpoint,
                       edit=run.fork_edit)
    breaks = Breakpoints.of(run)
    if breaks:
        payload["breakpoints"] = breaks.payload()
    return payload


async def _afork(graph: Any, claim: Claim) -> None:
    """Copy the parent's checkpoint into the fork's thread, then apply its edit."""
    run = claim.run
    source = await aparent_thread(run)
    saved = await debugging.acopy_checkpoint(
        graph.checkpointer, source_thread=source,
        checkpoint_id=run.forked_from_checkpoint, target_thread=run.thread_id)
    edit = run.fork_edit or {}
    if edit.get("values"):
        await debugging.aapply_edit(graph, saved, edit["values"],
                                    as_node=edit.get("as_node") or "",
                                    spec=get_graph(run.graph))


async def _astream(graph: Any, payload: Any, config: RunnableConfig, breaks: Breakpoints,
                   writer: EventWriter, translator: StreamTranslator,
                   requests: Requests, watch: WriteWatch) -> tuple[Stop, Breakpoints]:
    """Stream until the graph stops for good or is cancelled; new breakpoints are taken
    at the node boundary where they are seen, and the stream goes on with them."""
    while True:
        stop = await _astream_once(graph, payload, config, breaks, writer, translator,
                                   requests, watch)
        if stop is not Stop.BREAKPOINTS:
            return stop, breaks
        breaks = await Breakpoints.aread(writer.run.id)
        writer.add({"kind": Kind.BREAKPOINTS_CHANGED, "payload": breaks.payload()})
        payload = None


async def _astream_once(graph: Any, payload: Any, config: RunnableConfig,
                        breaks: Breakpoints, writer: EventWriter,
                        translator: StreamTranslator, requests: Requests,
                        watch: WriteWatch) -> Stop:
    """Stream the graph once, recording every part, until it ends or a request stops it
    (or a checkpoint write fails: the run cannot go on unsaved)."""
    run = writer.run
    requests.breakpoints = False
    # (namespace, mode, data) triples: subgraphs=True with a list of modes; closed on the
    # way out, so LangGraph finishes its checkpoint writes before a restart
    parts: AsyncIterator[Any] = graph.astream(
        payload, config, stream_mode=STREAM_MODES, subgraphs=True,
        durability=planwatch_setting("DURABILITY"), context=run.context,
        interrupt_before=breaks.for_langgraph(breaks.before),
        interrupt_after=breaks.for_langgraph(breaks.after),
    )
    try:
        async with contextlib.aclosing(parts):  # type: ignore[type-var]
            async for ns, mode, data in parts:
                watch.check()  # durability "async" would raise a failed save only at the end
                for event in translator.translate(ns, mode, data):
                    writer.add(event)
                if mode == "checkpoints":
                    writer.current_node = translator.current_node
                    if requests.cancel:
                        return Stop.CANCEL
                    if not ns and requests.breakpoints:
                        return Stop.BREAKPOINTS
                writer.flush_behind()  # a node that starts shows while it runs
    except CheckpointWriteFailed:
        raise
    except Exception:
        watch.check()  # the failed write is the cause: say so
        raise
    return Stop.END
