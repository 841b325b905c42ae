"""The loop host: the thread, event loop, slots and heartbeats that runs execute on.

One ``Executor`` per process (:func:`dashboard.runs.dispatch.get_executor`) owns a private
event loop in a daemon thread, so sync views, async consumers, management commands and
procrastinate jobs all hand it work the same way. It holds what runs share (LangGraph's
saver and BaseStore, the run store's fast path, the compiled graphs, one write-behind for
every run's events, the runs-list digest) and, per run, a slot: it claims the run
(:mod:`~dashboard.runs.store`), has :mod:`~dashboard.runs.execution` execute the claim
(again while answers arrived meanwhile), and calls the ``on_stopped`` it was given once
the run leaves its slot. Heartbeats prove it alive and bring operators' requests.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
import os
import socket
import sqlite3
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import psycopg
from asgiref.sync import sync_to_async
from django.db import DatabaseError, connections

from config.connections import run_pool_sizes
from dashboard.runs import doorbells, instruments, otel, tokens
from dashboard.runs.conf import planwatch_setting
from dashboard.runs.execution import EventWriter, Outcome, Requests, aexecute
from dashboard.runs.langgraph_store import aopen_store
from dashboard.runs.modelcalls import ContentPolicy, model_call_recorder
from dashboard.runs.orm import database_sync_to_async
from dashboard.runs.record import WriteBehind
from dashboard.runs.savers import Fence, RunLost, SaverHandle, WriteWatch, aopen_saver, is_postgres
from dashboard.runs.store import (
    RunExhausted,
    RunStore,
    fail_held,
    release_failed,
    release_runs,
)
from dashboard.runs.tokens import TokenBell
from planner.llm import LLMPort, make_llm
from planner.registry import GraphSpec, get_graph
from planner.search import default_search
from planner.steering import ModelSettings

logger = logging.getLogger("planwatch.runs")

DATABASE_ERRORS = (DatabaseError, psycopg.Error, sqlite3.Error, OSError)
"""Faults of the database (or the way to it): a run they stop is recovered, not failed."""

OnStopped = Callable[[uuid.UUID], None]
"""Called, in a worker thread, with each run the executor stops executing (ended, paused
or cancelled): :func:`dashboard.runs.dispatch.dispatch_queued_after` in every process."""


@dataclass(frozen=True)
class ExecutorHealth:
    """What a readiness probe asks of an executor: its loop alive, slots, last beat."""

    alive: bool  # its loop thread runs
    slots: int  # runs it may execute at once
    busy: int  # runs in a slot now
    beat_age: float | None  # seconds since its heartbeat loop last went round (None: not yet)


class Executor:
    """Executes runs on a private event loop; at most ``MAX_CONCURRENT_RUNS`` at once."""

    def __init__(self, *, max_concurrent: int | None = None, think_time: float | None = None,
                 on_stopped: OnStopped | None = None):
        self.on_stopped = on_stopped
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
        self._active: dict[uuid.UUID, Requests] = {}  # the runs in a slot, and their requests
        self.handed_over = 0  # runs left at a node boundary by drain()
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._runs: RunStore | None = None  # the run store's fast path
        self.writes: set[asyncio.Task[None]] = set()  # flushes in flight, of every run
        self._jobs: set[asyncio.Task[Any]] = set()  # every aexecute, waiting, claiming or running
        self._digest: doorbells.RunsDigest | None = None  # node moves for the runs list
        self._behind: WriteBehind | None = None  # every run's events, written together
        self._beat_at: float | None = None  # time.monotonic() of the heartbeat loop's last round
        self.draining = False  # its process stops: it claims nothing more

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Start the loop thread (idempotent; not again once drained)."""
        if (self._thread and self._thread.is_alive()) or self.draining:
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
                                   tasks=self.writes)
        self._heartbeat_task = loop.create_task(self._heartbeat_forever())
        self._started.set()
        loop.run_forever()
        # stopped: what lives on this loop goes with it (the tokens' Redis client, then,
        # as the loop closes, channels-redis's layer on it), else each executor stopped
        # leaves its loop and two Redis connections open (five descriptors; test processes
        # ran past 1024)
        try:
            loop.run_until_complete(tokens.aclose_client())
            loop.run_until_complete(loop.shutdown_asyncgens())
        except Exception:  # Redis away: the descriptors go with the process
            logger.warning("closing the executor's loop failed", exc_info=True)
        finally:
            loop.close()

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
            pending = {*self._jobs, *self.writes}
            if pending:
                await asyncio.wait(pending, timeout=timeout / 2)
            if self._digest:
                await self._digest.aflush()
            if self._runs:
                await self._runs.aclose()
                self._runs = None
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

    def drain(self, grace: float) -> int:
        """Stop executing, as a stopping process does: claim nothing more, have each run
        leave at its next node boundary within ``grace`` seconds (the rest are cancelled
        where they are), and release them all for another process to take over at once
        from their last checkpoint; how many runs were left to be taken over."""
        self.draining = True
        for requests in list(self._active.values()):
            requests.handover = True
        deadline = time.monotonic() + grace
        while self._active and time.monotonic() < deadline:
            time.sleep(0.05)
        self.stop()
        return self.handed_over + release_runs(owner=self.owner)

    def submit(self, run_id: uuid.UUID, mode: str = "start") -> concurrent.futures.Future[None]:
        """Schedule a run's execution; returns a future that resolves when it stops (at
        once once drained: another process takes the run)."""
        if self.draining:
            refused: concurrent.futures.Future[None] = concurrent.futures.Future()
            refused.set_result(None)
            return refused
        self.start()
        assert self._loop is not None
        # A fresh context: the caller's (a request's asgiref executors, say) would be
        # copied into the task and break its sync_to_async calls once the request ends.
        return contextvars.Context().run(
            asyncio.run_coroutine_threadsafe, self.aexecute(run_id, mode), self._loop
        )

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` on the executor's loop in the background until it ends or stop()."""
        if self.draining:
            work.close()
            return
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
        requests = self._active.get(run_id)
        if requests is not None:
            requests.breakpoints = True
        return requests is not None

    def request_cancel(self, run_id: uuid.UUID) -> bool:
        """Cancel a run this process executes: its stream in flight stops at once, the
        nodes in flight with it (from any thread); whether this process executes it."""
        requests = self._active.get(run_id)
        if requests is not None:
            requests.cancel = True  # seen at once by a stream about to begin
            if self._loop is not None:
                self._loop.call_soon_threadsafe(requests.cancel_now)
        return requests is not None

    def health(self) -> ExecutorHealth:
        """Whether the loop runs, its slots, and how long ago its heartbeat loop went round
        (it goes round every ``HEARTBEAT_SECONDS``, runs or none: a stuck loop stops it)."""
        thread = self._thread
        beat = self._beat_at
        return ExecutorHealth(alive=bool(thread and thread.is_alive()),
                              slots=int(self.max_concurrent), busy=len(self._active),
                              beat_age=None if beat is None else time.monotonic() - beat)

    # -- execution -------------------------------------------------------------------

    async def _aopen_saver(self) -> RunStore:
        assert self._saver_lock is not None
        async with self._saver_lock:
            if self._saver is None:
                # each saver call holds a connection only briefly (RUN_DB_POOL_SIZE)
                size, log_size = run_pool_sizes(
                    run_db_pool_size=planwatch_setting("RUN_DB_POOL_SIZE"),
                    max_concurrent=self.max_concurrent)
                self._saver = await aopen_saver(pool_size=size)
                # the store shares the savers' pool on PostgreSQL
                pool = getattr(self._saver.saver, "conn", None) if is_postgres() else None
                self._store = await self._store_stack.enter_async_context(aopen_store(pool))
                self._runs = await RunStore.aopen(self._saver, postgres=is_postgres(),
                                                   pool_size=log_size)
                assert self._behind is not None
                self._behind.store = self._runs
            assert self._runs is not None
            return self._runs

    async def astore(self) -> Any:
        """The LangGraph store the graphs are compiled with (opened with the saver)."""
        await self._aopen_saver()
        return self._store

    async def agraph(self, graph_name: str, builder: Any = None, *, fence: Fence | None = None,
                     settings: ModelSettings | None = None
                     ) -> tuple[GraphSpec, Any, WriteWatch]:
        """The graph's spec and compiled graph, with a saver instance for one run (see
        ``SaverHandle``) whose writes ``fence`` guards, and the watch of that saver's
        checkpoint writes; ``builder`` (a graph made for this run) is compiled for it
        alone, and so is a graph built on the model a run's ``settings`` choose."""
        await self._aopen_saver()
        assert self._saver is not None
        spec = get_graph(graph_name)
        if builder is None and settings is not None and settings.changes_model \
                and spec.takes_model:
            builder = spec.build(llm=self.llm(settings), search=default_search())
        if builder is not None:
            compiled = builder.compile(checkpointer=self._saver.saver, store=self._store)
            return (spec, *self._saver.for_run(compiled, fence))
        if graph_name not in self._graphs:
            builder = spec.build(llm=self.llm(), search=default_search())
            self._graphs[graph_name] = builder.compile(checkpointer=self._saver.saver,
                                                       store=self._store)
        return (spec, *self._saver.for_run(self._graphs[graph_name], fence))

    def llm(self, settings: ModelSettings | None = None) -> LLMPort:
        """The model the graphs call: ``PLANWATCH_LLM``, or the one a run's ``settings``
        choose, with their parameters (the deployment's timeout and base URL either way)."""
        chosen = settings or ModelSettings()
        return make_llm(chosen.model or planwatch_setting("LLM"), think_time=self.think_time,
                        timeout=planwatch_setting("LLM_TIMEOUT"),
                        base_url=planwatch_setting("LLM_BASE_URL"),
                        temperature=chosen.temperature, max_tokens=chosen.max_tokens)

    async def aexecute(self, run_id: uuid.UUID, mode: str = "start") -> None:
        """Claim and execute one run until it finishes, interrupts, fails or is cancelled;
        answers that arrived while it ran are taken up at once (claimed again to resume)."""
        assert self._sem is not None
        task = asyncio.current_task()
        assert task is not None
        self._jobs.add(task)  # from the start: stop() must not close the saver under a claim
        try:
            if self.draining:  # another process takes it (its reaper, or a worker's job)
                return
            if mode == "recover" and run_id in self._active:
                return  # it executes it (its heartbeat late after a stall): nothing to recover
            async with self._sem:
                requests = Requests()
                instruments.RUNS_IN_FLIGHT.inc()
                executed = False  # a run this executor never held hands nothing on
                try:
                    runs = await self._aopen_saver()
                    while not self.draining and (
                            claim := await runs.aclaim(run_id, owner=self.owner, mode=mode)):
                        self._hold(run_id, requests)
                        executed = True
                        run, first = claim.run, claim.next_seq
                        # the run's recorders: its events, on the write-behind every run
                        # shares, and every model call of its graph, whoever makes it
                        writer = EventWriter(run, next_seq=first, behind=self._behind,
                                             digest=self._digest)
                        calls = model_call_recorder(
                            writer, prices=planwatch_setting("MODEL_PRICES"),
                            policy=ContentPolicy(
                                keep=planwatch_setting("TRACE_CONTENT"),
                                limit=planwatch_setting("TRACE_CONTENT_LIMIT")),
                            # its LangGraph client streams messages: tokens as they come
                            tokens=TokenBell(run.id, writer.bell) if run.stream_tokens else None)
                        writer.on_lost = requests.lose
                        try:
                            outcome = await aexecute(claim, host=self, writer=writer,
                                                     calls=calls, requests=requests)
                        except RunLost as lost:  # another executor holds it now
                            writer.lose()
                            logger.warning("%s", lost)
                            executed = False  # its new owner hands it on
                            break
                        except DATABASE_ERRORS as exc:
                            # the database is away: the run is recovered once it is back
                            # (counted: one that stops so every time is failed in the end)
                            await self._arelease_failed(run_id, exc)
                            raise
                        except Exception as exc:  # not a node's: those fail the run in it
                            logger.exception("run %s could not be executed", run_id)
                            try:
                                await database_sync_to_async(fail_held)(
                                    run_id, owner=self.owner, error=(
                                        f"{type(exc).__name__}: {exc}", traceback.format_exc()))
                            except DATABASE_ERRORS as fault:  # as above: recovered, counted
                                await self._arelease_failed(run_id, fault)
                                raise
                            break
                        # the execution's spans, built and sent on threads of their own
                        otel.export_soon(run.id, after=first - 1, upto=run.last_seq)
                        if outcome is Outcome.HANDED_OVER:  # it goes on elsewhere
                            self.handed_over += 1
                            executed = False
                        if outcome is not Outcome.PAUSED:
                            break
                        mode = "resume"
                except RunExhausted as exhausted:  # failed instead of recovered again
                    logger.warning("run %s: %s", run_id, exhausted)
                    executed = True  # the runs waiting on it go on
                finally:
                    self._let_go(run_id, requests)
                    instruments.RUNS_IN_FLIGHT.dec()
            # outside the slot: runs enqueued behind this one may start now
            if executed and self.on_stopped is not None:
                await database_sync_to_async(_stopped)(self.on_stopped, run_id)
        finally:
            self._jobs.discard(task)

    async def _arelease_failed(self, run_id: uuid.UUID, exc: BaseException) -> None:
        """Let go of a run whose execution stopped on a database fault, the fault kept as
        its last error, for any executor (this one too) to recover it at its next sweep;
        if the database is still away, it is recovered once its heartbeat is stale."""
        try:
            await database_sync_to_async(release_failed)(
                run_id, owner=self.owner, error=f"{type(exc).__name__}: {exc}".strip())
        except Exception:
            logger.warning("run %s: letting it go after a database fault failed", run_id,
                           exc_info=True)

    def _hold(self, run_id: uuid.UUID, requests: Requests) -> None:
        """Make ``requests`` the run's once its claim holds: heartbeats, cancels and
        breakpoint changes reach the run through them from now on.

        Only a claim that holds may: the reaper may send back a run this executor still
        executes (its heartbeat late after a stall), that dispatch's claim is refused, and
        had it put its requests in the live run's place first (then taken them away),
        the run would go unheard: no heartbeat, no cancel, found stale every round. Such
        a dispatch is not skipped either: a resume may arrive just as the run pauses, and
        its claim is then the one that holds."""
        if self.draining:  # drain() flagged the runs it found; this one came after
            requests.handover = True
        requests.lost = False  # a claim that holds: this execution's (a pause's past one)
        self._active[run_id] = requests

    def _let_go(self, run_id: uuid.UUID, requests: Requests) -> None:
        """The task that held the run with ``requests`` is done with it: forget them,
        unless a later claim of the same run (another task's resume) holds it now."""
        if self._active.get(run_id) is requests:
            del self._active[run_id]

    async def _heartbeat_forever(self) -> None:
        interval = planwatch_setting("HEARTBEAT_SECONDS")
        instruments.EXECUTOR_SLOTS.set(self.max_concurrent)
        while True:
            self._beat_at = time.monotonic()
            instruments.EXECUTOR_HEARTBEAT.set_to_current_time()
            await asyncio.sleep(interval)
            if not self._active or self._runs is None:  # (a run is claimed on the store)
                continue
            try:
                # on the store's connection, on this loop: never behind the ORM's thread
                streams = {run_id: r.stream for run_id, r in self._active.items()}
                cancelled, rebreak, held = await self._runs.aheartbeat(list(self._active),
                                                                       owner=self.owner)
                for run_id, requests in self._active.items():
                    if run_id not in held and requests.stream is not None and \
                            requests.stream is streams.get(run_id):
                        requests.lose()  # taken over while this executor stalled
                    if run_id in cancelled and not requests.cancel:  # asked in another process
                        requests.cancel_now()
                    requests.breakpoints |= run_id in rebreak
            except Exception:
                logger.warning("heartbeat failed", exc_info=True)


def _stopped(on_stopped: OnStopped, run_id: uuid.UUID) -> None:
    """Tell ``on_stopped`` the run left its slot (in a worker thread, with the ORM)."""
    try:
        on_stopped(run_id)
    except Exception:
        logger.warning("after run %s stopped: %s failed", run_id, on_stopped, exc_info=True)
