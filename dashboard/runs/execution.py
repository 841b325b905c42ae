"""Executing one claimed run, in three steps: begin, stream, outcome.

:func:`aexecute` takes a :class:`~dashboard.runs.store.Claim` that the loop host
(:mod:`~dashboard.runs.executor`) holds, and the run's :class:`EventWriter` (its events,
numbered and buffered, written behind by the executor's
:class:`~dashboard.runs.record.WriteBehind`): *begin* records the claim's event and picks
what the graph is fed and where it starts (the input, the answers, the past checkpoint a
fork branches from, or nothing to go on from the run's newest checkpoint); *stream*
runs LangGraph's stream, translating each part (:mod:`~dashboard.runs.translate`) into
events, until the stream ends, an operator's
cancel cuts it at once, or a request stops it at a node boundary (new breakpoints, a
handover), and says which as a :class:`Stop` value; *outcome*
records where the run stands (paused with its questions, halted at a breakpoint,
succeeded with the output its ``GraphSpec.output_of`` picks, failed, cancelled), each
with its last events in one write, returned as an :class:`Outcome`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from django.utils import timezone
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from dashboard.models import Run, RunEvent
from dashboard.runs import debugging, doorbells
from dashboard.runs.budgets import BudgetGuard, BudgetMeter, Trip, ameter_for, trip_event
from dashboard.runs.conf import planwatch_setting
from dashboard.runs.jsonsafe import from_column, to_jsonable
from dashboard.runs.orm import database_sync_to_async
from dashboard.runs.record import EVENT_DEFAULTS, TaskClock, WriteBehind, event_dict, track
from dashboard.runs.savers import CheckpointWriteFailed, Fence, RunLost, WriteWatch
from dashboard.runs.store import (
    Claim,
    RunStore,
    acancelled_by,
    arelease,
    atake_breakpoints,
    awrite_orm,
)
from dashboard.runs.translate import STREAM_MODES, StreamTranslator
from planner.langgraph_config import RunUser
from planner.registry import GraphSpec
from planner.steering import PROMPTS_KEY, ModelSettings

if TYPE_CHECKING:
    from dashboard.runs.modelcalls import ModelCallRecorder

logger = logging.getLogger("planwatch.runs")

Kind = RunEvent.Kind


@dataclass
class Requests:
    """What operators asked of a run while it executes: a cancel stops the graph's stream
    at once (the nodes in flight with it); the others are read at node boundaries."""

    cancel: bool = False
    """Stop the run (it is cancelled)."""
    breakpoints: bool = False
    """Take the run's new breakpoints and go on."""
    handover: bool = False
    """This process stops: leave the run at the next node boundary for another to take."""
    lost: bool = False
    """Another executor took the run over: stop, writing nothing (:meth:`lose`)."""
    stream: asyncio.Task[Stop] | None = None
    """The task streaming the graph now (:func:`_astream_once`), which a cancel cancels."""
    budget: BudgetMeter | None = None
    """The run's budget meter (None: no budget): a budget reached stops the stream at the
    next node boundary (a model call that would cross one is refused before it is sent)."""

    def cancel_now(self) -> None:
        """Cancel the run: its stream in flight stops at once, as LangGraph's server cancels
        a run's task (call on the executor's loop); before or between streams, the next
        node boundary stops it."""
        self.cancel = True
        if self.stream is not None and not self.stream.done():
            self.stream.cancel("the run was cancelled")

    def lose(self) -> None:
        """Another executor holds the run now: its stream in flight stops at once, and the
        execution ends with :class:`RunLost`, writing nothing more (the executor's loop)."""
        self.lost = True
        if self.stream is not None and not self.stream.done():
            self.stream.cancel("the run was taken over")


class Stop(enum.Enum):
    """Why one stream of the graph stopped."""

    END = "end"  # the stream ran out: the graph ended, waits for answers, or hit a breakpoint
    CANCEL = "cancel"  # an operator cancelled the run (its stream cut where it was)
    BREAKPOINTS = "breakpoints"  # an operator changed the run's breakpoints
    HANDOVER = "handover"  # this process stops: another takes the run over
    BUDGET = "budget"  # a budget was reached (dashboard/runs/budgets.py)


class Outcome(enum.Enum):
    """Where an execution left its run."""

    SUCCEEDED = "succeeded"  # the graph reached its end
    PAUSED = "paused"  # the graph waits for answers (they may have arrived meanwhile)
    HALTED = "halted"  # a breakpoint or a step stopped the graph
    CANCELLED = "cancelled"  # an operator cancelled it
    FAILED = "failed"  # a node raised, or the executor could not go on
    HANDED_OVER = "handed_over"  # left, still running, for another process to take over


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


class EventWriter:
    """Buffers a run's events, numbers them, and has them written behind the graph.

    An event that names a checkpoint waits in the buffer, with the events after it, until
    the saver has saved that checkpoint (:meth:`watch_saves`): with durability "async"
    LangGraph streams a checkpoint while its save is still under way, and a reader that
    follows the log (a stream's ``values``, a trace's checkpoint link) must find it. It
    waits ``HOLD_MAX`` seconds at most (a checkpoint never saved holds nothing up).
    """

    HOLD_MAX = 1.0

    def __init__(self, run: Run, *, next_seq: int, store: RunStore | None = None,
                 behind: WriteBehind | None = None, interval: float = 0.0,
                 tasks: set[asyncio.Task[Any]] | None = None,
                 digest: doorbells.RunsDigest | None = None) -> None:
        """Write behind through the executor's ``behind``, or one of its own on ``store``."""
        self.run = run
        self.behind = behind or WriteBehind(store, interval=interval, tasks=tasks)
        self.bell = doorbells.RunBell(run.id, status=run.status, node=run.current_node,
                                      digest=digest, rung=next_seq - 1)
        self.next_seq = next_seq
        self.buffer: list[dict[str, Any]] = []
        self.current_node = run.current_node
        self.watch: WriteWatch | None = None
        self.clock = TaskClock()
        """When the run's tasks began and ended, as its model-call recorder heard."""
        self._holding: tuple[str, float] | None = None  # (checkpoint id, since)
        self.closed = False
        """The run's last event was written (:meth:`afinish`): nothing is added after it."""
        self.on_lost: Callable[[], None] | None = None
        """Told once a write of the run is refused: another executor took it over."""

    def add(self, fields: dict[str, Any]) -> None:
        """Number one event, stamp it with when it happened (unless it says), buffer it;
        dropped once the writer is closed (a sync node's thread, which a cancel cannot
        stop, may still report a model call after the run's closing event)."""
        if self.closed:
            logger.debug("run %s: %s after its closing event, dropped", self.run.id,
                         fields.get("kind"))
            return
        row = {**EVENT_DEFAULTS, **fields, "seq": self.next_seq}
        if not row.get("at"):
            self.clock.stamp(row, timezone.now())
        self.buffer.append(row)
        self.next_seq += 1

    def lose(self) -> None:
        """Another executor took the run over (a write was refused by its fence): what is
        buffered is dropped, nothing more is written, and :attr:`on_lost` is told."""
        if self.closed and not self.buffer:
            return
        self.closed = True
        self.buffer.clear()
        self.behind.waiting.pop(self.run.id, None)
        if self.on_lost is not None:
            self.on_lost()

    def flush_behind(self) -> None:
        """Have what is buffered written behind the graph (see :class:`WriteBehind`); not
        once the run's final write is under way (it takes everything)."""
        if self.buffer and not self.closed:
            self.behind.note(self)

    def watch_saves(self, watch: WriteWatch) -> None:
        """Hold an event that names a checkpoint until ``watch`` has seen it saved."""
        self.watch = watch
        watch.on_saved = self.flush_behind

    def take(self, now: Any, *, everything: bool = False) -> list[dict[str, Any]]:
        """Hand over the buffered events that may be written (``everything``: all of
        them), stamped with the moment of their write."""
        cut = len(self.buffer) if everything else self._ready()
        batch, self.buffer = self.buffer[:cut], self.buffer[cut:]
        for row in batch:
            row["created_at"] = now
        return batch

    def _ready(self) -> int:
        """How many buffered events may be written: those before the first that names a
        checkpoint not yet saved, unless it has waited ``HOLD_MAX`` already."""
        if self.watch is None:
            return len(self.buffer)
        saved = self.watch.saved
        for index, row in enumerate(self.buffer):
            if row["kind"] != Kind.CHECKPOINT:
                continue
            checkpoint_id = row["checkpoint_id"]
            if checkpoint_id in saved:
                saved.discard(checkpoint_id)  # each is named once
                continue
            loop = asyncio.get_running_loop()
            if self._holding is None or self._holding[0] != checkpoint_id:
                self._holding = (checkpoint_id, loop.time())
                loop.call_later(self.HOLD_MAX, self.flush_behind)
                return index
            if loop.time() - self._holding[1] < self.HOLD_MAX:
                return index
            logger.warning("run %s: checkpoint %s not saved after %.1f s; its event is "
                           "written without it", self.run.id, checkpoint_id, self.HOLD_MAX)
        return len(self.buffer)

    async def aflush(self, **final: Any) -> None:
        """Write everything buffered now (with the run's final status, if given).

        A write behind in flight with earlier events of this run lands first (seq stays
        ordered); events still waiting for the next one are written here instead.
        """
        await self.behind.arelease(self)
        writes = self.behind.store
        batch = self.take(timezone.now(), everything=True)
        if not batch and not final:
            return
        now = batch[0]["created_at"] if batch else timezone.now()
        if writes is None:
            values = await awrite_orm(self.run, batch, self.current_node, final)
        elif final:
            values = await writes.astop(self.run, batch, current_node=self.current_node,
                                        now=now, final=final)
        else:
            (values,) = await writes.aprogress([(self.run, batch, self.current_node)],
                                               now=now)
        await self.bell.aring([event_dict(r) for r in batch], values, time.time())

    async def afinish(
        self, *, status: str, output: Any = None, error: tuple[str, str] | None = None,
        pending: list[dict[str, Any]] | None = None, cancel_interrupts: bool = False,
    ) -> None:
        """Write the last events together with the run's final (or paused) status."""
        final: dict[str, Any] = {"status": status}
        if output is not None:
            final["output"] = output
        if error:
            final["error"] = error
        if pending is not None:
            final["pending"] = pending
        final["cancel_interrupts"] = cancel_interrupts
        self.closed = True
        await self.aflush(**final)
        if pending or cancel_interrupts:
            await doorbells.abroadcast_inbox()


class Host(Protocol):
    """What an execution needs of the loop host that holds its claim."""

    owner: str
    writes: set[asyncio.Task[None]]

    async def astore(self) -> Any:
        """The LangGraph store the host's graphs are compiled with."""

    async def agraph(self, graph_name: str, builder: Any = None, *, fence: Fence | None = None,
                     settings: ModelSettings | None = None
                     ) -> tuple[GraphSpec, Any, WriteWatch]:
        """The graph's spec and compiled graph (``builder`` compiled, if given: a graph
        made for this run; else one built for this run's model ``settings``, if they
        change the model), with a saver instance for one run whose writes ``fence``
        guards, and that saver's watch of its checkpoint writes."""


async def aexecute(claim: Claim, *, host: Host, writer: EventWriter,
                   calls: ModelCallRecorder,
                   requests: Requests) -> Outcome:
    """Stream a claimed run's graph until it pauses, ends, fails or is cancelled.

    ``writer`` records the run's events, ``calls`` (a LangChain callback handler) its
    model calls; both are the host's to make, on what it shares between runs.
    """
    run = claim.run
    translator = StreamTranslator(seen_checkpoints=set(claim.checkpoint_ids))
    settings = ModelSettings.stored(run.model_settings)
    config = _config(run.configurable, run.thread_id, calls,
                     run.recursion_limit or planwatch_setting("RECURSION_LIMIT"),
                     metadata={"run_id": claim.langgraph_run_id, "graph_id": run.graph},
                     prompts=settings.prompts)
    breaks = Breakpoints.of(run)
    try:
        # (a run with no budget costs no read: the claim returned its budget column)
        requests.budget = meter = await ameter_for(run.id, emit=_later(writer)) \
            if run.budget else None
        if meter is not None:  # first: a call it refuses is never recorded as sent
            guard = BudgetGuard(meter, prices=planwatch_setting("MODEL_PRICES"))
            config["callbacks"] = [guard, *(config.get("callbacks") or [])]  # type: ignore[misc]
        async with contextlib.AsyncExitStack() as resources:
            builder = await _aper_run_builder(run, config, host, resources)
            spec, graph, watch = await host.agraph(run.graph, builder,
                                                   fence=Fence(run.id, run.epoch),
                                                   settings=settings)
            if planwatch_setting("DURABILITY") != "exit":  # "exit" saves the last one only
                writer.watch_saves(watch)
            payload, start = await _abegin(claim, spec, graph, config, writer,
                                           owner=host.owner)
            stop, breaks = await _astream(graph, payload, config, breaks, writer, translator,
                                          requests, watch, start=start)
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
        with contextlib.suppress(RunLost):  # another executor holds it: nothing to write
            await asyncio.shield(track(host.writes, writer.aflush()))
        raise
    except RunLost:
        raise  # the run is another executor's: nothing of this one is written
    except Exception as exc:
        if requests.budget is not None and requests.budget.trip is not None:
            # a model call was refused at the budget (the node raised, or its fallback went
            # on): the run stops or pauses at its last checkpoint
            writer.current_node = translator.current_node or writer.current_node
            return await abudget(writer, trip=requests.budget.trip, graph=graph, spec=spec,
                                 config=config, translator=translator, calls=calls)
        logger.exception("run %s failed", run.id)
        # the header names the node that failed (the stream said so), not the one that ran
        # before the last checkpoint
        writer.current_node = translator.current_node or writer.current_node
        await afail(writer, exc)
        return Outcome.FAILED
    if stop is Stop.CANCEL:
        # the tasks and model calls it stopped in: their bars end at the cancel
        writer.current_node = translator.current_node or writer.current_node
        calls.cancel_in_flight()
        await acancel(writer, running=translator.in_flight())
        return Outcome.CANCELLED
    if stop is Stop.BUDGET:
        assert requests.budget is not None and requests.budget.trip is not None
        return await abudget(writer, trip=requests.budget.trip, graph=graph, spec=spec,
                             config=config, translator=translator, calls=calls)
    if stop is Stop.HANDOVER:
        await writer.aflush()
        await arelease(writer.run.id, owner=host.owner)
        return Outcome.HANDED_OVER
    if is_paused(state):
        await apause(writer, state=state, translator=translator)
        return Outcome.PAUSED
    if state is not None and state.next:  # a breakpoint (or a step) stopped the graph
        await ahalt(writer, state=state, translator=translator,
                           after=breaks.stopped_after(translator.last_root_node))
        return Outcome.HALTED
    values = state.values if state is not None else translator.root_values
    await asucceed(writer, spec=spec, values=values)
    return Outcome.SUCCEEDED


async def _aper_run_builder(run: Run, config: RunnableConfig, host: Host,
                            resources: contextlib.AsyncExitStack) -> Any:
    """The graph a ``langgraph.json`` factory makes for this run (entered on
    ``resources`` until the run's execution ends), or None: the graph's one serves."""
    per_run = run.spec.per_run
    if per_run is None:
        return None
    # (a claim's run holds the columns the executor needs, not who created it)
    name = await Run.objects.filter(id=run.id).values_list(
        "created_by__username", flat=True).afirst()
    user = RunUser(identity=name, display_name=name) if name else None
    public = {k: v for k, v in config.items() if k != "callbacks"}
    return await resources.enter_async_context(
        per_run(config=public, context=run.context, user=user, store=await host.astore()))


def _config(configurable: dict[str, Any] | None, thread_id: str,
            calls: ModelCallRecorder, recursion_limit: int,
            metadata: dict[str, Any] | None = None,
            prompts: Mapping[str, str] | None = None) -> RunnableConfig:
    """The graph's config: a client's configurable values, Planwatch's thread, the run's
    recursion limit (start, resume and recovery alike), ``metadata`` (the run's id and
    graph, which LangGraph copies into each checkpoint's metadata, as LangGraph's server
    has them there), the run's own prompts (which the graph reads there), and every model
    call of the graph, whoever makes it, reporting to the run's log."""
    own = {PROMPTS_KEY: dict(prompts)} if prompts else {}
    return {"configurable": {**from_column(configurable or {}), **own,
                             "thread_id": thread_id},
            "metadata": dict(metadata or {}),
            "recursion_limit": recursion_limit,
            "callbacks": [calls] if planwatch_setting("MODEL_CALLS") else []}


async def _abegin(claim: Claim, spec: GraphSpec, graph: Any, config: RunnableConfig,
                  writer: EventWriter, *, owner: str) -> tuple[Any, RunnableConfig]:
    """Record the claim's event (and the answers it took); return what to feed the graph,
    and the config it starts from: ``config`` (the thread's newest checkpoint) for a start,
    the run's own newest for a resume, a continue or a recovery, the past checkpoint (maybe
    edited) for a fork."""
    run = claim.run
    writer.add({"kind": claim.kind, "payload": _first_payload(claim, owner)})
    if claim.answers:
        for answer in claim.answers:
            writer.add(answer.event())
        answers: Command[Any] = Command(resume={a.interrupt_id: from_column(a.answer)
                                                for a in claim.answers})
        return answers, await _aown_latest(graph, config, claim.langgraph_run_ids)
    kind = claim.kind
    if kind == Kind.RUN_RECOVERED and not await _abegun(graph, config, claim):
        # its executor stopped before the graph took its input: begin again, as it began
        kind = Kind.RUN_FORKED if run.parent_id and run.forked_from_checkpoint else \
            Kind.RUN_STARTED
    if kind == Kind.RUN_FORKED:
        start = await _afork(spec, graph, claim, config)
        # go on from the past (maybe edited) checkpoint, with the thread's next input if it
        # has one (LangGraph's server API's next run on a thread)
        return from_column((run.fork_edit or {}).get("input")), start
    if kind == Kind.RUN_STARTED:
        return from_column(run.input), config
    return None, await _aown_latest(graph, config, claim.langgraph_run_ids)  # recover, continue


async def _abegun(graph: Any, config: RunnableConfig, claim: Claim) -> bool:
    """Whether a recovered run's graph took its input already: a checkpoint of its thread
    names the run's first LangGraph run, the run's own id (see :func:`_config`; a run that
    went on had taken it). Until then the thread's newest checkpoint is
    another run's (or a fork's copied one) and going on "from the last checkpoint" would
    end at once, or at that run's end, as if it had succeeded. Checkpoints written before
    they named their run: its log names one of them."""
    mine: RunnableConfig = {"configurable": {"thread_id": claim.run.thread_id,
                                             "checkpoint_ns": ""}}
    async for _ in graph.checkpointer.alist(mine, filter={"run_id": str(claim.run.id)},
                                            limit=1):
        return True
    return bool(claim.checkpoint_ids) and not await _anames_runs(graph, mine)


async def _anames_runs(graph: Any, config: RunnableConfig) -> bool:
    """Whether the thread's newest checkpoint names the run that wrote it."""
    found = await graph.checkpointer.aget_tuple(config)
    return found is not None and "run_id" in (found.metadata or {})


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


async def _afork(spec: GraphSpec, graph: Any, claim: Claim, config: RunnableConfig
                 ) -> RunnableConfig:
    """Where a fork starts: the parent's checkpoint, a branch of the same thread (a
    parent of another thread, a fork made from the pages into a new thread: its
    checkpoint copied in as the new thread's root), then its edit applied there."""
    run = claim.run
    source = await aparent_thread(run)
    if source == run.thread_id:
        start = await _aaddressed(graph, config, run.forked_from_checkpoint)
    else:
        saved = await debugging.acopy_checkpoint(
            graph.checkpointer, source_thread=source,
            checkpoint_id=run.forked_from_checkpoint, target_thread=run.thread_id,
            run_id=str(run.id))
        start = _at(config, saved["configurable"])
    edit = run.fork_edit or {}
    if edit.get("values"):
        saved = await debugging.aapply_edit(graph, start, from_column(edit["values"]),
                                            as_node=edit.get("as_node") or "", spec=spec)
        start = await _aaddressed(graph, config, saved["configurable"]["checkpoint_id"])
    return start


async def _aown_latest(graph: Any, config: RunnableConfig, langgraph_run_ids: list[str]
                       ) -> RunnableConfig:
    """``config`` at the run's own newest root checkpoint, the one it goes on from (a run
    enqueued behind it may have written on the thread since it stopped): the newest
    naming the latest of its LangGraph runs (``langgraph_run_ids``, the current first)
    that wrote one; ``config`` (the thread's newest) if it wrote none."""
    for langgraph_run_id in langgraph_run_ids:
        if own := await _anewest(graph, config, run_id=langgraph_run_id):
            return await _aaddressed(graph, config, own)
    return config


async def _aaddressed(graph: Any, config: RunnableConfig, checkpoint_id: str
                      ) -> RunnableConfig:
    """``config`` at root checkpoint ``checkpoint_id`` of its thread; ``config`` itself
    when that is the thread's newest: LangGraph then goes on from it (a resume), where
    one addressed by id is time travel (finished tasks run again, after a ``fork``
    checkpoint), as LangGraph's server does for a run from a past checkpoint."""
    if await _anewest(graph, config) == checkpoint_id:
        return config
    return _at(config, {"checkpoint_ns": "", "checkpoint_id": checkpoint_id})


async def _anewest(graph: Any, config: RunnableConfig, *, run_id: str = "") -> str:
    """The id of the newest root checkpoint of ``config``'s thread (naming ``run_id``, if
    given), or "" if none. The saver's list is closed before this returns: the SQLite
    saver holds its lock until then."""
    root: RunnableConfig = {"configurable": {
        "thread_id": config["configurable"]["thread_id"], "checkpoint_ns": ""}}
    listed = graph.checkpointer.alist(root, filter={"run_id": run_id} if run_id else None,
                                      limit=1)
    async with contextlib.aclosing(listed):
        async for found in listed:
            return str(found.config["configurable"]["checkpoint_id"])
    return ""


def _at(config: RunnableConfig, checkpoint: Any) -> RunnableConfig:
    """``config`` at a checkpoint of its thread (``checkpoint_ns``, ``checkpoint_id``)."""
    return {**config, "configurable": {
        **config["configurable"], "checkpoint_ns": checkpoint.get("checkpoint_ns", ""),
        "checkpoint_id": checkpoint["checkpoint_id"]}}


async def _astream(graph: Any, payload: Any, config: RunnableConfig, breaks: Breakpoints,
                   writer: EventWriter, translator: StreamTranslator,
                   requests: Requests, watch: WriteWatch, *,
                   start: RunnableConfig) -> tuple[Stop, Breakpoints]:
    """Stream from ``start`` until the graph stops for good or is cancelled; new
    breakpoints are taken at the node boundary where they are seen, and the stream goes on
    with them from the thread's newest checkpoint (``config``)."""
    while True:
        stop = await _astream_once(graph, payload, start, breaks, writer, translator,
                                   requests, watch)
        start = config
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
    (or a checkpoint write fails: the run cannot go on unsaved).

    The stream runs as a task of its own, :attr:`Requests.stream`: a cancel cancels that
    task, and with it the nodes in flight (LangGraph cancels its tasks when its stream is
    closed), while this execution goes on to record the cancel. The run's checkpoints stay
    those of its last completed step."""
    requests.breakpoints = False
    if requests.cancel:  # cancelled while it began, or between two streams
        return Stop.CANCEL
    streaming = asyncio.ensure_future(_aconsume(graph, payload, config, breaks, writer,
                                                translator, requests, watch))
    requests.stream = streaming
    try:
        return await streaming
    except asyncio.CancelledError:
        this = asyncio.current_task()
        if not streaming.cancelled() or not (requests.cancel or requests.lost) or (
                this is not None and this.cancelling()):
            raise  # the execution itself is cancelled (the executor stops)
        if requests.lost:
            raise Fence(writer.run.id, writer.run.epoch).lost() from None
        return Stop.CANCEL
    finally:
        requests.stream = None


async def _aconsume(graph: Any, payload: Any, config: RunnableConfig, breaks: Breakpoints,
                    writer: EventWriter, translator: StreamTranslator, requests: Requests,
                    watch: WriteWatch) -> Stop:
    """Record every part of one stream of the graph until it ends or a request stops it
    at a node boundary."""
    run = writer.run
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
                    # (a graph that has ended, nothing next, is done within its budget)
                    if not ns and requests.budget and data.get("next") \
                            and requests.budget.at_boundary():
                        return Stop.BUDGET
                    if not ns and requests.handover:
                        return Stop.HANDOVER
                    if not ns and requests.breakpoints:
                        return Stop.BREAKPOINTS
                writer.flush_behind()  # a node that starts shows while it runs
    except CheckpointWriteFailed:
        raise
    except Exception:
        watch.check()  # the failed write is the cause: say so
        raise
    return Stop.END


# -- outcome: where the run stands when its stream ends or raises -----------------------


def pending_from(state: Any, translator: StreamTranslator) -> list[dict[str, Any]]:
    """The interrupts the graph now waits on, with node and namespace where known."""
    seen = {i.interrupt_id: i for i in translator.interrupts}
    pending = []
    for task in state.tasks:
        for item in task.interrupts:
            known = seen.get(item.id)
            pending.append({
                "interrupt_id": item.id,
                "node": known.node if known else task.name,
                "namespace": known.namespace if known else "",
                "payload": to_jsonable(item.value),
            })
    return pending


def is_paused(state: Any) -> bool:
    """Whether the graph's state (``aget_state``) waits on an operator's answer."""
    return state is not None and bool(
        state.interrupts or any(t.interrupts for t in state.tasks))


async def apause(writer: EventWriter, *, state: Any, translator: StreamTranslator) -> None:
    """The graph waits for answers: record its questions, nobody holds the run meanwhile."""
    await writer.afinish(status=Run.State.INTERRUPTED, pending=pending_from(state, translator))


async def ahalt(writer: EventWriter, *, state: Any, translator: StreamTranslator,
                after: str) -> None:
    """A breakpoint (or a step) stopped the graph: say where, nobody holds the run meanwhile."""
    writer.add({"kind": Kind.RUN_PAUSED, "node": after,
                "payload": {"before": list(state.next), "after": after}})
    if not after and state.next:
        writer.current_node = state.next[0]
    await writer.afinish(status=Run.State.PAUSED)


async def asucceed(writer: EventWriter, *, spec: GraphSpec, values: Any) -> Any:
    """The graph reached its end: the run's output is what its graph picks from the state."""
    output = to_jsonable(spec.output_of(values))
    writer.add({"kind": Kind.RUN_SUCCEEDED, "payload": {"output": output}})
    await writer.afinish(status=Run.State.SUCCEEDED, output=output)
    return output


async def afail(writer: EventWriter, exc: BaseException) -> None:
    """A node raised (or the executor could not go on): the run fails with the error."""
    message = f"{type(exc).__name__}: {exc}"
    writer.add({"kind": Kind.RUN_FAILED, "payload": {"error": message}})
    await writer.afinish(status=Run.State.FAILED, error=(message, traceback.format_exc()),
                         cancel_interrupts=True)


async def acancel(writer: EventWriter, *, running: list[dict[str, str]] | None = None,
                  budget: Trip | None = None) -> None:
    """An operator cancelled the run (or its ``budget`` was reached): it stops where it
    stands; the event says who (or which budget), and which tasks were ``running`` (cut
    short, never finished: none at a node boundary)."""
    if budget is not None:
        payload: dict[str, Any] = {"reason": "budget", "by": "", "budget": budget.payload()}
    else:
        payload = {"reason": "cancelled", "by": await acancelled_by(writer.run.id)}
    if running:
        payload["running"] = running
    node = next((t["node"] for t in running or () if not t["namespace"]), "")
    writer.add({"kind": Kind.RUN_CANCELLED, "node": node, "payload": payload})
    await writer.afinish(status=Run.State.CANCELLED, cancel_interrupts=True)


async def abudget(writer: EventWriter, *, trip: Trip, graph: Any, spec: GraphSpec,
                  config: RunnableConfig, translator: StreamTranslator,
                  calls: ModelCallRecorder) -> Outcome:
    """A budget was reached: recorded, then the run stops (cancelled, the budget in its
    final event) or pauses at its last checkpoint for an operator to extend it; a graph
    that ended right there succeeds."""
    writer.add(trip_event(trip))
    if trip.action == "stop":
        calls.cancel_in_flight()
        await acancel(writer, running=translator.in_flight(), budget=trip)
        return Outcome.CANCELLED
    state = await graph.aget_state(config)
    if is_paused(state):  # it waits for answers anyway: the budget stands until it goes on
        await apause(writer, state=state, translator=translator)
        return Outcome.PAUSED
    if not state.next:
        await asucceed(writer, spec=spec, values=state.values)
        return Outcome.SUCCEEDED
    writer.add({"kind": Kind.RUN_PAUSED, "node": "", "payload": {
        "before": list(state.next), "after": "", "budget": trip.payload(),
        "on_limit": trip.action}})
    writer.current_node = state.next[0]
    await writer.afinish(status=Run.State.PAUSED)
    return Outcome.HALTED


def _later(writer: EventWriter) -> Any:
    """Add an event to ``writer`` once the callback that noticed it is done (a warning
    after the model call that crossed its share)."""
    loop = asyncio.get_running_loop()

    def emit(fields: dict[str, Any]) -> None:
        def add() -> None:
            writer.add(fields)
            writer.flush_behind()
        loop.call_soon_threadsafe(add)
    return emit
