"""The executor: runs planner graphs with LangGraph's checkpointer and records every part.

One ``Executor`` per process owns a private event loop in a daemon thread, so sync views,
async consumers, management commands and procrastinate jobs all hand it work the same
way. A run is *claimed* with a conditional UPDATE (no other live executor may hold it),
so one run is never executed by two processes at once. Each run executes with a saver
instance of its own (see ``SaverHandle.for_run``). Events are written behind the graphs:
parts are buffered per run, and one write takes every run's (``WriteBehind``), then
rings each run's doorbell.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import os
import socket
import threading
import traceback
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections, transaction
from django.db.models import F, Max, Q
from django.db.models.functions import Coalesce
from django.utils import timezone
from langgraph.types import Command

from dashboard import broadcast
from dashboard.checkpointer import SaverHandle, aopen_saver, is_postgres
from dashboard.events import STREAM_MODES, StreamTranslator
from dashboard.jsonsafe import to_jsonable
from dashboard.models import Interrupt, Run, RunEvent
from dashboard.recorder import (
    EventWriter,
    WriteBehind,
    relax_commit,
    track,
    usable_connection,
)
from dashboard.sink import EventSink
from planner.llm import make_llm
from planner.registry import get_graph
from planner.search import SearchPort

logger = logging.getLogger("planwatch.runner")

Kind = RunEvent.Kind


class RunCancelled(Exception):
    """Raised inside the stream loop when an operator cancelled the run."""


def planwatch_setting(name: str) -> Any:
    """One entry of ``settings.PLANWATCH``."""
    return settings.PLANWATCH[name]


def default_search() -> SearchPort:
    """The search port graphs get: the local corpus."""
    from planner.search import LocalCorpusSearch  # type: ignore[attr-defined]

    return LocalCorpusSearch()


@dataclass
class _Job:
    run_id: uuid.UUID
    mode: str  # "start" | "resume" | "recover"


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
        self._saver_lock: asyncio.Lock | None = None
        self._sem: asyncio.Semaphore | None = None
        self._graphs: dict[str, Any] = {}
        self._active: dict[uuid.UUID, asyncio.Task[None]] = {}
        self._cancel: set[uuid.UUID] = set()
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._sink: EventSink | None = None
        self._writes: set[asyncio.Task[None]] = set()  # flushes in flight, of every run
        self._jobs: set[asyncio.Task[Any]] = set()  # every aexecute, waiting, claiming or running
        self._digest: broadcast.RunsDigest | None = None  # node moves for the runs list
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
        self._digest = broadcast.RunsDigest()
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

    def enable_reaper(self) -> None:
        """Also pick up, now and periodically, runs orphaned by a dead executor."""
        self.start()
        assert self._loop is not None
        self._loop.call_soon_threadsafe(lambda: self._loop.create_task(self._reap_forever()))

    async def _reap_forever(self) -> None:
        from dashboard.services import run_recover_stale

        include_queued = True  # at start-up, runs queued by a process that died
        while True:
            try:
                await sync_to_async(run_recover_stale)(include_queued=include_queued)
                include_queued = False
            except Exception:
                logger.warning("recovering stale runs failed", exc_info=True)
            await asyncio.sleep(max(1.0, planwatch_setting("STALE_AFTER_SECONDS") / 2))

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
            llm = make_llm(planwatch_setting("LLM"), think_time=self.think_time)
            builder = spec.build(llm=llm, search=default_search())
            self._graphs[graph_name] = builder.compile(checkpointer=self._saver.saver)
        return self._graphs[graph_name]

    async def _aclaim(self, run_id: uuid.UUID, mode: str) -> _Claim | None:
        """Take the run for this executor, or return None if it is not ours to run."""
        if mode == "start":  # the common case: one UPDATE on the saver's connection
            sink = await self._aopen_saver()
            now = timezone.now()
            stale = now - timedelta(seconds=planwatch_setting("STALE_AFTER_SECONDS"))
            run = await sink.aclaim_queued(run_id, owner=self.owner, now=now, stale=stale)
            if run is not None:
                return _Claim(run, Kind.RUN_STARTED, run.last_seq + 1, [], [])
        return await _aclaim_orm(run_id, self.owner, mode)

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
                        claim = await self._aexecute_claimed(claim)
                finally:
                    self._active.pop(run_id, None)
                    self._cancel.discard(run_id)
        finally:
            self._jobs.discard(task)

    async def _aexecute_claimed(self, claim: _Claim) -> _Claim | None:
        run = claim.run
        writer = EventWriter(run, next_seq=claim.next_seq, behind=self._behind,
                             digest=self._digest)
        translator = StreamTranslator(seen_checkpoints=set(claim.checkpoint_ids))
        config = {"configurable": {"thread_id": run.thread_id}, "recursion_limit": 10_000}
        try:
            graph = await self._compiled(run.graph)
            assert self._saver is not None
            graph = self._saver.for_run(graph)
            payload: Any
            writer.add({"kind": claim.kind, "payload": {"owner": self.owner}})
            if claim.answers:
                for ans in claim.answers:
                    writer.add(_answered_event(ans))
                payload = Command(resume={a.interrupt_id: a.answer for a in claim.answers})
            elif claim.kind == Kind.RUN_STARTED:
                payload = run.input
            else:
                payload = None  # recover: continue from the last checkpoint
            async for ns, mode, data in graph.astream(
                payload, config, stream_mode=STREAM_MODES, subgraphs=True,
                durability=planwatch_setting("DURABILITY"),
            ):
                for event in translator.translate(ns, mode, data):
                    writer.add(event)
                if mode == "checkpoints":
                    writer.current_node = translator.current_node
                    if run.id in self._cancel:
                        raise RunCancelled
                writer.flush_behind()  # a node that starts shows while it runs
            # the node that paused (ask_user, say) started after the last checkpoint
            writer.current_node = translator.current_node
            # a run that raised nothing ended in the last root checkpoint it streamed (the
            # saver's read is needed only for the questions a paused run waits on)
            paused = translator.interrupts or translator.root_values is None
            state = await graph.aget_state(config) if paused else None
        except RunCancelled:
            writer.add({"kind": Kind.RUN_CANCELLED, "payload": {"reason": "cancelled"}})
            await writer.afinish(status=Run.Status.CANCELLED, cancel_interrupts=True)
            return None
        except asyncio.CancelledError:
            await asyncio.shield(track(self._writes, writer.aflush()))
            raise
        except Exception as exc:
            logger.exception("run %s failed", run.id)
            writer.add({
                "kind": Kind.RUN_FAILED,
                "payload": {"error": f"{type(exc).__name__}: {exc}"},
            })
            await writer.afinish(
                status=Run.Status.FAILED,
                error=(f"{type(exc).__name__}: {exc}", traceback.format_exc()),
                cancel_interrupts=True,
            )
            return None
        if state is not None and (state.interrupts or any(t.interrupts for t in state.tasks)):
            await writer.afinish(status=Run.Status.INTERRUPTED,
                                 pending=_pending_from(state, translator))
            # answers that arrived while we ran are consumed straight away
            return await self._aclaim(run.id, "resume")
        writer.add({"kind": Kind.RUN_SUCCEEDED, "payload": {}})
        values = to_jsonable(state.values if state is not None else translator.root_values)
        output = values.get("result", values) if isinstance(values, dict) else values
        await writer.afinish(status=Run.Status.SUCCEEDED, output=output)
        return None

    async def _heartbeat_forever(self) -> None:
        interval = planwatch_setting("HEARTBEAT_SECONDS")
        while True:
            await asyncio.sleep(interval)
            if not self._active:
                continue
            try:
                cancelled = await _aheartbeat(list(self._active), self.owner)
                self._cancel.update(cancelled)
            except Exception:
                logger.warning("heartbeat failed", exc_info=True)


# -- claiming and recording (database work, on Django's sync side) ----------------------


@dataclass
class _Answer:
    interrupt_pk: int
    interrupt_id: str
    answer: Any
    answered_by: str
    node: str
    namespace: str


@dataclass
class _Claim:
    run: Run
    kind: str
    next_seq: int
    checkpoint_ids: list[str]
    answers: list[_Answer]


@sync_to_async
def _aclaim_orm(run_id: uuid.UUID, owner: str, mode: str) -> _Claim | None:
    """Take any claimable run (start, resume, recover) through the ORM, or return None."""
    usable_connection()
    now = timezone.now()
    stale = now - timedelta(seconds=planwatch_setting("STALE_AFTER_SECONDS"))
    free = Q(owner="") | Q(owner=owner) | Q(heartbeat_at__lt=stale)
    with transaction.atomic():
        relax_commit()  # a lost claim leaves the run queued: recovery dispatches it again
        runs = Run.objects.select_for_update().filter(id=run_id)
        run = runs.filter(free).first()
        if run is None:
            return None
        answers: list[_Answer] = []
        if run.status == Run.Status.QUEUED and mode == "start":
            kind = Kind.RUN_STARTED
        elif run.status == Run.Status.RUNNING and run.owner != owner:
            kind = Kind.RUN_RECOVERED  # its executor died (stale heartbeat)
        elif run.status == Run.Status.INTERRUPTED:
            answers = _take_answers(run)
            if not answers:
                return None  # nothing to resume with yet
            kind = Kind.RUN_RESUMED
        else:
            return None
        runs.update(
            owner=owner, heartbeat_at=now, status=Run.Status.RUNNING,
            started_at=Coalesce(F("started_at"), now),
        )
        run.owner, run.heartbeat_at, run.status = owner, now, Run.Status.RUNNING
        run.started_at = run.started_at or now
        if kind == Kind.RUN_STARTED:  # a fresh run: no events, no checkpoints yet
            return _Claim(run, kind, run.last_seq + 1, [], answers)
        next_seq = (run.events.aggregate(m=Max("seq"))["m"] or 0) + 1
        checkpoints = list(
            run.events.filter(kind=Kind.CHECKPOINT).values_list("checkpoint_id", flat=True)
        )
    return _Claim(run, kind, next_seq, checkpoints, answers)


def _take_answers(run: Run) -> list[_Answer]:
    """Answered interrupts not yet fed to the graph; mark them consumed."""
    rows = list(
        run.interrupts.filter(status=Interrupt.Status.ANSWERED, checkpoint_id="")
        .select_related("answered_by")
    )
    last_cp = (
        run.events.filter(kind=Kind.CHECKPOINT, namespace="").order_by("-seq")
        .values_list("checkpoint_id", flat=True).first()
    ) or "-"
    Interrupt.objects.filter(pk__in=[r.pk for r in rows]).update(checkpoint_id=last_cp)
    return [
        _Answer(r.pk, r.interrupt_id, r.answer,
                r.answered_by.get_username() if r.answered_by else "", r.node, r.namespace)
        for r in rows
    ]


def _answered_event(ans: _Answer) -> dict[str, Any]:
    return {
        "kind": Kind.INTERRUPT_ANSWERED, "node": ans.node, "namespace": ans.namespace,
        "payload": {"interrupt_id": ans.interrupt_id, "answer": ans.answer,
                    "answered_by": ans.answered_by},
    }


def _pending_from(state: Any, translator: StreamTranslator) -> list[dict[str, Any]]:
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


@sync_to_async
def _aheartbeat(run_ids: list[uuid.UUID], owner: str) -> set[uuid.UUID]:
    """Prove this executor is alive; return the runs an operator asked to cancel."""
    usable_connection()
    Run.objects.filter(id__in=run_ids, owner=owner).update(heartbeat_at=timezone.now())
    return set(
        Run.objects.filter(id__in=run_ids, owner=owner, cancel_requested=True)
        .values_list("id", flat=True)
    )


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
