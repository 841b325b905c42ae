"""Executing one claimed run, in three steps: begin, stream, outcome.

:func:`aexecute` takes a :class:`~dashboard.runs.claims.Claim` that the loop host
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
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from dashboard.runs import debugging, finish
from dashboard.runs.claims import Breakpoints, Claim, aparent_thread
from dashboard.runs.conf import planwatch_setting
from dashboard.runs.modelcalls import ContentPolicy, ModelCallRecorder
from dashboard.runs.record import EventWriter, track
from dashboard.runs.translate import STREAM_MODES, StreamTranslator
from planner.registry import get_graph

logger = logging.getLogger("planwatch.runs")


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


class Host(Protocol):
    """What an execution needs of the loop host that holds its claim."""

    owner: str
    writes: set[asyncio.Task[None]]

    async def agraph(self, graph_name: str) -> Any:
        """The compiled graph, with a saver instance for one run."""

    def writer(self, claim: Claim) -> EventWriter:
        """An event writer for the claimed run, on the host's write-behind."""


async def aexecute(claim: Claim, *, host: Host, requests: Requests) -> Outcome:
    """Stream a claimed run's graph until it pauses, ends, fails or is cancelled."""
    run = claim.run
    writer = host.writer(claim)
    translator = StreamTranslator(seen_checkpoints=set(claim.checkpoint_ids))
    config = _config(run.configurable, run.thread_id, writer)
    breaks = Breakpoints.of(run)
    try:
        spec = get_graph(run.graph)
        graph = await host.agraph(run.graph)
        payload = await _abegin(claim, graph, config, writer, owner=host.owner)
        stop, breaks = await _astream(graph, payload, config, breaks, writer, translator,
                                      requests)
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
            writer: EventWriter) -> RunnableConfig:
    """The graph's config: a client's configurable values, Planwatch's thread, and every
    model call of the graph, whoever makes it, reporting to the run's log."""
    calls = ModelCallRecorder(
        writer, prices=planwatch_setting("MODEL_PRICES"),
        policy=ContentPolicy(keep=planwatch_setting("TRACE_CONTENT"),
                             limit=planwatch_setting("TRACE_CONTENT_LIMIT")))
    return {"configurable": {**(configurable or {}), "thread_id": thread_id},
            "recursion_limit": 10_000,
            "callbacks": [calls] if planwatch_setting("MODEL_CALLS") else []}


async def _abegin(claim: Claim, graph: Any, config: RunnableConfig, writer: EventWriter,
                  *, owner: str) -> Any:
    """Record the claim's event (and the answers it took); return what to feed the graph."""
    run = claim.run
    writer.add({"kind": claim.kind, "payload": claim.first_payload(owner)})
    if claim.answers:
        for answer in claim.answers:
            writer.add(answer.event())
        return Command(resume={a.interrupt_id: a.answer for a in claim.answers})
    if claim.kind == finish.Kind.RUN_FORKED:
        await _afork(graph, claim)
        # go on from the copied (and edited) checkpoint, with the thread's next input if it
        # has one (LangGraph's server API's next run on a thread)
        return (run.fork_edit or {}).get("input")
    if claim.kind == finish.Kind.RUN_STARTED:
        return run.input
    return None  # recover or continue: from the last checkpoint


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
                   requests: Requests) -> tuple[Stop, Breakpoints]:
    """Stream until the graph stops for good or is cancelled; new breakpoints are taken
    at the node boundary where they are seen, and the stream goes on with them."""
    while True:
        stop = await _astream_once(graph, payload, config, breaks, writer, translator,
                                   requests)
        if stop is not Stop.BREAKPOINTS:
            return stop, breaks
        breaks = await Breakpoints.aread(writer.run.id)
        writer.add({"kind": finish.Kind.BREAKPOINTS_CHANGED, "payload": breaks.payload()})
        payload = None


async def _astream_once(graph: Any, payload: Any, config: RunnableConfig,
                        breaks: Breakpoints, writer: EventWriter,
                        translator: StreamTranslator, requests: Requests) -> Stop:
    """Stream the graph once, recording every part, until it ends or a request stops it."""
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
    async with contextlib.aclosing(parts):  # type: ignore[type-var]
        async for ns, mode, data in parts:
            for event in translator.translate(ns, mode, data):
                writer.add(event)
            if mode == "checkpoints":
                writer.current_node = translator.current_node
                if requests.cancel:
                    return Stop.CANCEL
                if not ns and requests.breakpoints:
                    return Stop.BREAKPOINTS
            writer.flush_behind()  # a node that starts shows while it runs
    return Stop.END
