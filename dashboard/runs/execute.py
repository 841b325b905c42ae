"""Executing runs: claim, stream the graph, translate its parts, record them, finish.

One ``Executor`` per process owns a private event loop in a daemon thread, so sync views,
async consumers, management commands and procrastinate jobs all hand it work the same
way. A run is claimed first (:mod:`~dashboard.runs.claims`); then its graph streams with
LangGraph's checkpointer, each run with a saver instance of its own (see
``SaverHandle.for_run``); each part is translated into events
(:mod:`~dashboard.runs.translate`) that are written behind the graph, one write for every
run's (:mod:`~dashboard.runs.record`), which then rings each run's doorbell
(:mod:`~dashboard.runs.doorbells`); where the stream ends decides how the run finishes
(:mod:`~dashboard.runs.finish`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
import os
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from dashboard.runs import debugging, doorbells, finish, otel
from dashboard.runs.claims import Breakpoints, Claim, aclaim, aheartbeat, aparent_thread
from dashboard.runs.conf import planwatch_setting
from dashboard.runs.modelcalls import ContentPolicy, ModelCallRecorder
from dashboard.runs.record import EventWriter, WriteBehind, track, usable_connection
from dashboard.runs.savers import SaverHandle, aopen_saver, is_postgres
from dashboard.runs.sink import EventSink
from dashboard.runs.stores import aopen_store
from dashboard.runs.translate import STREAM_MODES, StreamTranslator
from planner.llm import make_llm
from planner.registry import get_graph
from planner.search import default_search

logger = logging.getLogger("planwatch.runs")


class RunCancelled(Exception):
    """Raised inside the stream loop when an operator cancelled the run."""


class BreakpointsChanged(Exception):
    """Raised inside the stream loop when an operator changed the run's breakpoints."""


class Executor:
    """Executes runs on a private event loop; at most ``MAX_CONCURRENT_RUNS`` at once."""

    def __init__(self, *, max_concurrent: int | None = None, think_time: float | None = None):
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.max_concurrent = max_concurrent or planwatch_setting("MAX_CONCURRENT_RUNS")
        self.think_time = (
            planwatch_setting("THINK_TIME") if think_time is None else think_time
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._saver: SaverHandle | None = None
        self._store: Any = None  # LangGraph's BaseStore every graph is compiled with
        self._store_stack = contextlib.AsyncExitStack()
        self._saver_lock: asyncio.Lock | None = None
        self._sem: asyncio.Semaphore | None = None
        self._graphs: dict[str, Any] = {}
        self._active: dict[uuid.UUID, asyncio.Task[None]] = {}
        self._cancel: set[uuid.UUID] = set()
        self._rebreak: set[uuid.UUID] = set()  # runs whose breakpoints an operator changed
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._sink: EventSink | None = None
        self._writes: set[asyncio.Task[None]] = set()  # flushes in flight, of every run
        self._jobs: set[asyncio.Task[Any]] = set()  # every aexecute, waiting, claiming or running
        self._digest: doorbells.RunsDigest | None = None  # node moves for the runs list
        self._behind: WriteBehind | None = None  # every run's events, written together

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Start the loop thread (idempotent)."""
        if self._thread and self._thread.is_alive():
            return
        self._started.clear()
        self._thread = threading.Thread(target=self._run_loop, name="planwatch-executor",
                                        daemon=True)
        self._thread.start()
        self._started.wait()

    def _run_loop(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._sem = asyncio.Semaphore(self.max_concurrent)
        self._saver_lock = asyncio.Lock()
        self._digest = doorbells.RunsDigest()
        self._behind = WriteBehind(None, interval=planwatch_setting("EVENT_WRITE_INTERVAL"),
                                   tasks=self._writes)
        self._heartbeat_task = loop.create_task(self._heartbeat_forever())
        self._started.set()
        loop.run_forever()

    def stop(self, timeout: float = 10) -> None:
        """Stop the loop after closing the saver (used by tests and shutdown)."""
        if not self._loop or not self._thread:
            return

        async def shutdown() -> None:
            for task in self._jobs:
                task.cancel()
            if self._heartbeat_task:
                self._heartbeat_task.cancel()
            # let cancelled runs write what they had (their flushes are shielded, so they
            # outlive the cancel) before the saver closes: nothing may write after stop()
            pending = {*self._jobs, *self._writes}
            if pending:
                await asyncio.wait(pending, timeout=timeout / 2)
            if self._digest:
                await self._digest.aflush()
            if self._sink:
                await self._sink.aclose()
                self._sink = None
            await self._store_stack.aclose()
            self._store = None
            if self._saver:
                await self._saver.aclose()
                self._saver = None
            # the ORM helpers ran in asgiref's worker thread: close that thread's connections
            await sync_to_async(connections.close_all)()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
            self._thread = None
            self._graphs.clear()

    def submit(self, run_id: uuid.UUID, mode: str = "start") -> concurrent.futures.Future[None]:
        """Schedule a run's execution; returns a future that resolves when it stops."""
        self.start()
        assert self._loop is not None
        # A fresh context: the caller's (a request's asgiref executors, say) would be
        # copied into the task and break its sync_to_async calls once the request ends.
        return contextvars.Context().run(
            asyncio.run_coroutine_threadsafe, self.aexecute(run_id, mode), self._loop
        )

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` on the executor's loop in the background until it ends or stop()."""
        self.start()
        assert self._loop is not None
        contextvars.Context().run(
            asyncio.run_coroutine_threadsafe, self._abackground(work), self._loop)

    async def _abackground(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._jobs.add(task)  # stop() cancels and waits for it like a run
        try:
            await work
        finally:
            self._jobs.discard(task)

    def request_breakpoints(self, run_id: uuid.UUID) -> bool:
        """Have a run this process executes take its new breakpoints at the next boundary."""
        if run_id in self._active:
            self._rebreak.add(run_id)
            return True
        return False

    def request_cancel(self, run_id: uuid.UUID) -> bool:
        """Flag a run this process executes; it stops at the next node boundary."""
        if run_id in self._active:
            self._cancel.add(run_id)
            return True
        return False

    # -- execution -------------------------------------------------------------------

    async def _aopen_saver(self) -> EventSink:
        assert self._saver_lock is not None
        async with self._saver_lock:
            if self._saver is None:
                # each saver call holds a connection only briefly: 20 serve 100 runs, and
                # PostgreSQL's default max_connections (100) is shared by every process
                size = max(4, min(self.max_concurrent, 20))
                self._saver = await aopen_saver(pool_size=size)
                # the store shares the savers' pool on PostgreSQL
                pool = getattr(self._saver.saver, "conn", None) if is_postgres() else None
                self._store = await self._store_stack.enter_async_context(aopen_store(pool))
                self._sink = await EventSink.aopen(self._saver, postgres=is_postgres(),
                                                   pool_size=max(2, size // 2))
                assert self._behind is not None
                self._behind.sink = self._sink
            assert self._sink is not None
            return self._sink

    async def _compiled(self, graph_name: str) -> Any:
        await self._aopen_saver()
        assert self._saver is not None
        if graph_name not in self._graphs:
            spec = get_graph(graph_name)
            llm = make_llm(planwatch_setting("LLM"), think_time=self.think_time,
                           timeout=planwatch_setting("LLM_TIMEOUT"))
            builder = spec.build(llm=llm, search=default_search())
            self._graphs[graph_name] = builder.compile(checkpointer=self._saver.saver,
                                                       store=self._store)
        return self._graphs[graph_name]

    async def _aclaim(self, run_id: uuid.UUID, mode: str) -> Claim | None:
        """Take the run for this executor, or return None if it is not ours to run."""
        sink = await self._aopen_saver()
        return await aclaim(run_id, owner=self.owner, mode=mode, sink=sink)

    async def aexecute(self, run_id: uuid.UUID, mode: str = "start") -> None:
        """Claim and execute one run until it finishes, interrupts, fails or is cancelled."""
        assert self._sem is not None
        task = asyncio.current_task()
        assert task is not None
        self._jobs.add(task)  # from the start: stop() must not close the saver under a claim
        try:
            async with self._sem:
                claim = await self._aclaim(run_id, mode)
                if claim is None:
                    return
                self._active[run_id] = task
                try:
                    while claim is not None:
                        run, first = claim.run, claim.next_seq
                        claim = await self._aexecute_claimed(claim)
                        # the execution's spans, built and sent on threads of their own
                        otel.export_soon(run.id, after=first - 1, upto=run.last_seq)
                finally:
                    self._active.pop(run_id, None)
                    self._cancel.discard(run_id)
                    self._rebreak.discard(run_id)
            # outside the slot: runs enqueued behind this one may start now
            await _adispatch_queued_after(run_id)
        finally:
            self._jobs.discard(task)

    async def _aexecute_claimed(self, claim: Claim) -> Claim | None:
        """Stream a claimed run's graph until it pauses, ends, fails or is cancelled.

        Returns the next claim when answers arrived while it ran (resume at once).
        """
        run = claim.run
        writer = EventWriter(run, next_seq=claim.next_seq, behind=self._behind,
                             digest=self._digest)
        translator = StreamTranslator(seen_checkpoints=set(claim.checkpoint_ids))
        # every model call of the graph, whoever makes it, reports to the run's log
        calls = ModelCallRecorder(
            writer, prices=planwatch_setting("MODEL_PRICES"),
            policy=ContentPolicy(keep=planwatch_setting("TRACE_CONTENT"),
                                 limit=planwatch_setting("TRACE_CONTENT_LIMIT")))
        # a client's configurable values reach the graph; the thread is Planwatch's to set
        config: RunnableConfig = {
            "configurable": {**(run.configurable or {}), "thread_id": run.thread_id},
            "recursion_limit": 10_000,
            "callbacks": [calls] if planwatch_setting("MODEL_CALLS") else []}
        try:
            spec = get_graph(run.graph)
            graph = await self._compiled(run.graph)
            assert self._saver is not None
            graph = self._saver.for_run(graph)
            payload: Any
            writer.add({"kind": claim.kind, "payload": claim.first_payload(self.owner)})
            if claim.answers:
                for answer in claim.answers:
                    writer.add(answer.event())
                payload = Command(resume={a.interrupt_id: a.answer for a in claim.answers})
            elif claim.kind == finish.Kind.RUN_FORKED:
                await self._afork(graph, claim, config)
                # go on from the copied (and edited) checkpoint, with the thread's next
                # input if it has one (LangGraph's server API's next run on a thread)
                payload = (run.fork_edit or {}).get("input")
            elif claim.kind == finish.Kind.RUN_STARTED:
                payload = run.input
            else:
                payload = None  # recover or continue: from the last checkpoint
            breaks = Breakpoints.of(run)
            while True:
                try:
                    await self._astream(graph, payload, config, breaks, writer, translator)
                    break
                except BreakpointsChanged:  # at a node boundary: go on with the new ones
                    breaks = await Breakpoints.aread(run.id)
                    writer.add({"kind": finish.Kind.BREAKPOINTS_CHANGED,
                                "payload": breaks.payload()})
                    payload = None
            # the node that paused (ask_user, say) started after the last checkpoint
            writer.current_node = translator.current_node
            # a run that raised nothing ended in the last root checkpoint it streamed (the
            # saver's read is needed for the questions a paused run waits on, and to learn
            # whether a breakpoint stopped it)
            paused = translator.interrupts or translator.root_values is None or bool(breaks)
            state = await graph.aget_state(config) if paused else None
        except RunCancelled:
            await finish.acancel(writer)
            return None
        except asyncio.CancelledError:
            await asyncio.shield(track(self._writes, writer.aflush()))
            raise
        except Exception as exc:
            logger.exception("run %s failed", run.id)
            await finish.afail(writer, exc)
            return None
        if finish.is_paused(state):
            await finish.apause(writer, state=state, translator=translator)
            # answers that arrived while we ran are consumed straight away
            return await self._aclaim(run.id, "resume")
        if state is not None and state.next:  # a breakpoint (or a step) stopped the graph
            await finish.ahalt(writer, state=state, translator=translator,
                               after=breaks.stopped_after(translator.last_root_node))
            return None
        values = state.values if state is not None else translator.root_values
        await finish.asucceed(writer, spec=spec, values=values)
        return None

    async def _astream(self, graph: Any, payload: Any, config: RunnableConfig,
                       breaks: Breakpoints, writer: EventWriter,
                       translator: StreamTranslator) -> None:
        """Stream the graph once, recording every part, until it ends or stops."""
        run = writer.run
        self._rebreak.discard(run.id)
        # (namespace, mode, data) triples: subgraphs=True with a list of modes; closed on
        # the way out, so LangGraph finishes its checkpoint writes before a restart
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
                    if run.id in self._cancel:
                        raise RunCancelled
                    if not ns and run.id in self._rebreak:
                        raise BreakpointsChanged
                writer.flush_behind()  # a node that starts shows while it runs

    async def _afork(self, graph: Any, claim: Claim, config: RunnableConfig) -> None:
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

    async def _heartbeat_forever(self) -> None:
        interval = planwatch_setting("HEARTBEAT_SECONDS")
        while True:
            await asyncio.sleep(interval)
            if not self._active:
                continue
            try:
                cancelled, rebreak = await aheartbeat(list(self._active), self.owner)
                self._cancel.update(cancelled)
                self._rebreak.update(rebreak)
            except Exception:
                logger.warning("heartbeat failed", exc_info=True)


RUN_STOPPED: list[Callable[[uuid.UUID], None]] = []
"""Called, in a worker thread, with each run an executor stops executing (ended, paused or
cancelled); :mod:`~dashboard.runs.dispatch` hands on the runs enqueued behind it."""


@sync_to_async
def _adispatch_queued_after(run_id: uuid.UUID) -> None:
    usable_connection()
    for hook in RUN_STOPPED:
        try:
            hook(run_id)
        except Exception:
            logger.warning("after run %s stopped: %s failed", run_id, hook, exc_info=True)


_executor: Executor | None = None
_executor_lock = threading.Lock()


def get_executor() -> Executor:
    """This process's executor, started on first use."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = Executor()
        _executor.start()
        return _executor


def reset_executor() -> None:
    """Stop this process's executor (tests; settings changes)."""
    global _executor
    with _executor_lock:
        if _executor is not None:
            _executor.stop()
            _executor = None
