"""A run's event log as server-sent events, in LangGraph's stream modes.

The log is the truth: a stream reads events after a cursor (the ``Last-Event-ID`` it
resumes from), waits on the run's doorbell for more, and ends when the run stops (ends,
or waits for an answer or at a breakpoint) and every event up to its last seq was sent:
its last event is ``end`` (the run and its status, langgraph-sdk's ``EndStreamEvent``), a
failed run's ``error``.
Each SSE event carries the seq of the log event it comes from as its id, on the last part
of that event only, so a client resuming after id N has seen all of N and nothing after.
The ``messages`` and ``messages-tuple`` modes of a live stream also carry the chunks of
the run's model answers as they come (:mod:`dashboard.runs.tokens`), shaped as LangGraph's
server sends them; they carry no id (no event of the log). A message a stream got chunks of
is not sent again whole when its node ends, as LangGraph's server does not; one it got none
of (joined later, resumed, replayed) comes whole then.
A database read that fails after the response started is tried again (a dropped pooled
connection); if it still fails the stream ends with an ``error`` event, as LangGraph's
server ends one, never silently open. A stream this process stops following before the run
stopped (it drains) is cut, not finished (:class:`StreamCut`), so its client resumes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from channels.db import database_sync_to_async
from django.core.exceptions import RequestAborted
from langchain_core.messages import AIMessageChunk

from config.dberrors import transient
from dashboard.budget_reviews import budget_interrupt
from dashboard.checkpoints import CheckpointView, checkpoint_get
from dashboard.lgserver import shapes
from dashboard.lgserver.events import stream_events
from dashboard.models import Run, RunEvent
from dashboard.runs import instruments, states
from dashboard.runs.budgets import BudgetPause
from dashboard.runs.conf import planwatch_setting
from dashboard.runs.follow import aread, follow
from dashboard.runs.jsonsafe import dumps, to_jsonable

Kind = RunEvent.Kind
logger = logging.getLogger("planwatch.lgserver")

MODES = ("values", "updates", "custom", "messages", "messages-tuple", "debug", "tasks",
         "checkpoints", "events")
"""The stream modes a request may name (``events``: :mod:`dashboard.lgserver.events`)."""

TOKEN_MODES = frozenset(("messages", "messages-tuple"))
"""The modes that stream model answers chunk by chunk as messages (a call tagged
``nostream`` aside)."""

CHUNK_MODES = TOKEN_MODES | {"events"}
"""The modes that get the chunks of model answers as they come: ``events`` as
``on_chat_model_stream`` events (every call's, as ``astream_events`` streams them)."""


def streams_tokens(stream_mode: Any) -> bool:
    """Whether a run request's ``stream_mode`` (a mode or a list, as clients send it) asks
    for the chunks of its model answers, so that its model calls stream them (as LangGraph's
    server streams a run's chat models only for those modes)."""
    modes = [stream_mode] if isinstance(stream_mode, str) else stream_mode
    return isinstance(modes, list | tuple) and bool(CHUNK_MODES.intersection(
        m for m in modes if isinstance(m, str)))



HEARTBEAT = b": heartbeat\n\n"
"""An SSE comment: clients skip it; proxies see the stream is alive (LangGraph's bytes)."""


def sse(event: str, data: Any, event_id: str | None = None) -> bytes:
    """One server-sent event."""
    lines = [f"event: {event}", f"data: {dumps(data, default=str)}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    return ("\n".join(lines) + "\n\n").encode()


def _name(mode: str, namespace: str, subgraphs: bool) -> str:
    return f"{mode}|{namespace}" if subgraphs and namespace else mode


def _interrupts(event: dict[str, Any], graph: str) -> list[dict[str, Any]]:
    payload = event["payload"]
    return [{"value": shapes.offered(graph, payload.get("value")),
             "id": payload.get("interrupt_id", "")}]


class _Streamed:
    """A message whose chunks a stream sent: their metadata, its call (the ``run_id`` of
    its ``events``), whether it is hidden from the messages modes (tagged ``nostream``),
    and (``messages`` mode) the message so far."""

    def __init__(self, meta: dict[str, Any], call: str = "", hidden: bool = False) -> None:
        self.meta = meta
        self.call = call
        self.hidden = hidden
        self.so_far: AIMessageChunk | None = None


class PartMaker:
    """Turns one run's events (and chunks of its model answers) into ``(event name, data)``
    parts for the asked modes."""

    def __init__(self, run: Run, modes: Iterable[str], subgraphs: bool,
                 langgraph_run_id: UUID | None = None) -> None:
        self.run = run
        self.modes = set(modes)
        self.subgraphs = subgraphs
        self.thread_id = str(run.conversation_id)
        self.langgraph_run_id = str(langgraph_run_id or run.id)
        """The LangGraph run the parts are of (``run_id`` in their metadata)."""
        self.streamed: dict[str, _Streamed] = {}
        """The messages this stream sent chunks of, from their first, by id."""
        self.whole: set[str] = set()
        """The ids of the messages it sent whole (their late chunks are not sent)."""
        self.chunked_calls: set[str] = set()
        """The model calls whose ``on_chat_model_stream`` events it sent chunk by chunk (their
        answer is not sent again as one chunk when they end)."""

    @property
    def wants_tokens(self) -> bool:
        """Whether the stream's modes carry chunks of model answers."""
        return bool(self.modes & TOKEN_MODES)

    def reads_saver(self, event: dict[str, Any]) -> bool:
        """Whether the parts of ``event`` need its checkpoint (:meth:`checkpoint_of`)."""
        return event["kind"] == Kind.CHECKPOINT and bool(
            self.modes & {"values", "checkpoints", "debug"}) and (
            self.subgraphs or not event["namespace"])

    def checkpoint_of(self, event: dict[str, Any]) -> CheckpointView | None:
        """The checkpoint ``event`` names, as the saver has it (None: not saved, or not yet)."""
        return checkpoint_get(thread_id=self.run.thread_id,
                              checkpoint_id=event["checkpoint_id"],
                              checkpoint_ns=event["namespace"])

    def parts(self, event: dict[str, Any], view: CheckpointView | None = None
              ) -> list[tuple[str, Any]]:
        """The parts of one event (a subgraph's only with ``subgraphs``); ``view``: its
        checkpoint, where :meth:`reads_saver` says the parts need it."""
        ns = event["namespace"]
        if ns and not self.subgraphs:
            return []
        kind = event["kind"]
        out: list[tuple[str, Any]] = []
        modes = self.modes
        if "events" in modes:
            out.extend((_name("events", ns, self.subgraphs), item) for item in stream_events(
                event, run_id=self.langgraph_run_id, thread_id=self.thread_id)
                if not (item["event"] == "on_chat_model_stream"
                        and item["run_id"] in self.chunked_calls))
        if kind == Kind.CHECKPOINT:
            if modes & {"values", "checkpoints", "debug"}:
                values = view.values if view else {}
                # as LangGraph's values mode: the state once the input is in (the input
                # checkpoint holds only the input, not yet applied), read from the
                # checkpoint, none at all if it was not saved (durability "exit")
                if ("values" in modes and view is not None
                        and event["payload"].get("source") != "input"):
                    out.append((_name("values", ns, self.subgraphs), values))
                cp = self._checkpoint(event, values)
                if "checkpoints" in modes:
                    out.append((_name("checkpoints", ns, self.subgraphs), cp))
                if "debug" in modes:
                    out.append((_name("debug", ns, self.subgraphs), self._debug(
                        "checkpoint", event, cp)))
        elif kind == Kind.NODE_STARTED:
            task = {"id": event["task_id"], "name": event["node"], "input": None,
                    "triggers": event["payload"].get("triggers", [])}
            if "tasks" in modes:
                out.append((_name("tasks", ns, self.subgraphs), task))
            if "debug" in modes:
                out.append((_name("debug", ns, self.subgraphs), self._debug("task", event, task)))
        elif kind in (Kind.NODE_FINISHED, Kind.NODE_FAILED):
            update = event["payload"].get("update")
            error = event["payload"].get("error")
            result = {"id": event["task_id"], "name": event["node"], "error": error,
                      "result": update, "interrupts": []}
            if "updates" in modes and kind == Kind.NODE_FINISHED:
                out.append((_name("updates", ns, self.subgraphs), {event["node"]: update}))
            if "tasks" in modes:
                out.append((_name("tasks", ns, self.subgraphs), result))
            if "debug" in modes:
                out.append((_name("debug", ns, self.subgraphs),
                            self._debug("task_result", event, result)))
            out.extend(self._messages(event, update))
        elif (pause := BudgetPause.of_event(event["seq"], kind, event["payload"])) \
                or kind == Kind.INTERRUPT_RAISED:
            # a question, or the interrupt Planwatch shows while the run waits at its budget
            interrupts = [budget_interrupt(self.run.id, pause)] if pause \
                else _interrupts(event, self.run.graph)
            for mode in ("values", "updates"):
                if mode in modes:
                    out.append((_name(mode, ns, self.subgraphs), {"__interrupt__": interrupts}))
        elif kind == Kind.CUSTOM and "custom" in modes:
            out.append((_name("custom", ns, self.subgraphs), event["payload"].get("data")))
        return out

    def _checkpoint(self, event: dict[str, Any], values: Any) -> dict[str, Any]:
        payload = event["payload"]
        conf = {"configurable": {"checkpoint_ns": event["namespace"],
                                 "checkpoint_id": event["checkpoint_id"]}}
        parent = payload.get("parent_checkpoint_id")
        return {
            "config": shapes.checkpoint_ref(self.thread_id, conf),  # type: ignore[arg-type]
            "parent_config": shapes.checkpoint_ref(
                self.thread_id, {"configurable": {"checkpoint_ns": event["namespace"],
                                                  "checkpoint_id": parent}}
            ) if parent else None,
            "metadata": {"source": payload.get("source"), "step": event["step"]},
            "values": values, "next": payload.get("next", []), "tasks": [],
        }

    def _debug(self, kind: str, event: dict[str, Any], payload: Any) -> dict[str, Any]:
        return {"type": kind, "step": event["step"], "payload": payload,
                "timestamp": event.get("created_at") or datetime.now(UTC).isoformat()}

    def _messages(self, event: dict[str, Any], update: Any) -> list[tuple[str, Any]]:
        """Messages a node added, whole, as ``messages-tuple`` and ``messages`` parts: those
        this stream got no chunks of (LangGraph's server leaves out a message it streamed:
        a client joins whatever carries its id into the one message)."""
        if not self.wants_tokens or not isinstance(update, dict):
            return []
        found = update.get("messages")
        items = found if isinstance(found, list) else [found] if isinstance(found, dict) else []
        messages = [m for m in items if isinstance(m, dict) and m.get("type") in (
            "ai", "AIMessageChunk", "tool")]
        meta = {"langgraph_node": event["node"], "langgraph_step": event["step"],
                "langgraph_checkpoint_ns": event["namespace"],
                "thread_id": self.thread_id, "run_id": self.langgraph_run_id}
        ns = event["namespace"]
        out: list[tuple[str, Any]] = []
        for index, message in enumerate(messages):
            if not message.get("id"):  # recorded before messages were given ids: a stable one
                message = {**message, "id": f"run-{self.run.id}-{event['seq']}-{index}"}
            if message["id"] in self.streamed:
                continue
            self.whole.add(message["id"])
            if "messages-tuple" in self.modes:
                out.append((_name("messages", ns, self.subgraphs), [message, meta]))
            if "messages" in self.modes:
                out.append(("messages/metadata", {message["id"]: {"metadata": meta}}))
                out.append(("messages/complete", [message]))
        return out

    def ending_parts(self, run: Run, values: Any) -> list[tuple[str, Any]]:
        """The parts of the message that says how ``run`` ended where no node of its graph
        was left to say it (it failed, or a budget stopped it): ``values``, its final state
        with that message last (:func:`shapes.with_outcome`), once more in ``values`` mode;
        the message whole in the messages modes. None for another run."""
        said = shapes.outcome_said(run)
        channel = shapes.transcript_channel(run.graph, values) if said else ""
        transcript = values[channel] if channel else []
        if not said or not transcript or transcript[-1].get("id") != said["id"]:
            return []
        out: list[tuple[str, Any]] = [("values", values)] if "values" in self.modes else []
        ending = {"node": run.current_node or "", "step": None, "namespace": "",
                  "seq": run.last_seq}
        return out + self._messages(ending, {"messages": [said]})

    def token_parts(self, items: list[dict[str, Any]]) -> list[tuple[str, Any]]:
        """The parts of chunks of model answers (items of :mod:`dashboard.runs.tokens`), as
        LangGraph's server streams them: ``messages-tuple`` sends each chunk beside its
        call's metadata; ``messages`` sends the metadata once, then the message so far with
        each chunk (``messages/partial``). A message is streamed from its first chunk only:
        one this stream joined midway comes whole when its node ends."""
        out: list[tuple[str, Any]] = []
        for item in items:
            message_id = item["id"]
            if "final" in item:  # the message its node returns has another id: that one
                if message_id in self.streamed:
                    self.streamed[item["final"]] = self.streamed[message_id]
                continue
            ns = item["ns"]
            if ns and not self.subgraphs:
                continue
            streamed = self.streamed.get(message_id)
            if streamed is None:
                if item["i"] or message_id in self.whole:
                    continue
                streamed = self.streamed[message_id] = _Streamed(
                    {**item["meta"], "thread_id": self.thread_id,
                     "run_id": self.langgraph_run_id}, str(item.get("call") or ""),
                    hidden=bool(item.get("hidden")))
                if "messages" in self.modes and not streamed.hidden:
                    out.append(("messages/metadata",
                                {message_id: {"metadata": streamed.meta}}))
            chunk = item["chunk"]
            if "events" in self.modes and streamed.call:
                self.chunked_calls.add(streamed.call)
                out.append((_name("events", ns, self.subgraphs),
                            chunk_event(chunk, streamed, self.langgraph_run_id)))
            if streamed.hidden:
                continue
            if "messages-tuple" in self.modes:
                out.append((_name("messages", ns, self.subgraphs), [chunk, streamed.meta]))
            if "messages" in self.modes:
                piece = AIMessageChunk(**{k: v for k, v in chunk.items() if k != "type"})
                streamed.so_far = piece if streamed.so_far is None else streamed.so_far + piece
                out.append(("messages/partial", [to_jsonable(streamed.so_far)]))
        return out


def chunk_event(chunk: dict[str, Any], streamed: _Streamed, run_id: str) -> dict[str, Any]:
    """One chunk of a model's answer as ``astream_events`` (v2) streams it: an
    ``on_chat_model_stream`` event of its call, shaped as :mod:`.events` shapes the call's
    start and end (LangGraph's server sends one a chunk, as the model writes)."""
    meta = streamed.meta
    # the task's id ends its namespace, as the recorder reads it (modelcalls.where_from)
    task = str(meta.get("langgraph_checkpoint_ns") or "").split("|")[-1].rpartition(":")[2]
    step = meta.get("langgraph_step")
    return {"event": "on_chat_model_stream", "name": str(meta.get("ls_model_name") or "model"),
            "run_id": streamed.call, "parent_ids": [run_id, task] if task else [run_id],
            "tags": [f"graph:step:{step}"] if step is not None else [],
            "metadata": {key: meta.get(key) for key in (
                "langgraph_node", "langgraph_step", "langgraph_checkpoint_ns",
                "ls_model_name", "ls_provider")} | {"langgraph_triggers": [],
                                                  "thread_id": meta.get("thread_id"),
                                                  "run_id": run_id},
            "data": {"chunk": {**chunk, "type": "AIMessageChunk"}}}


def _stopped(run: Run) -> bool:
    """A stream's stop rule: the run ended, or waits for an answer or at a breakpoint."""
    return not shapes.busy(run)


def run_error(message: str) -> dict[str, str]:
    """A failed run's error as LangGraph's server sends it: the exception's class name and
    its message (Planwatch records ``"ValueError: boom"``)."""
    found = re.match(r"^([A-Za-z_][\w.]*): (.*)$", message or "", re.DOTALL)
    if found:
        return {"error": found[1].rsplit(".", 1)[-1], "message": found[2]}
    return {"error": "RunFailed", "message": message or "the run failed"}


def run_end(run: Run, langgraph_run_id: UUID, *, superseded: bool) -> dict[str, str]:
    """The data of the ``end`` event that closes the stream of a run that stopped: the run
    and its final status, as langgraph-sdk's ``EndStreamEvent`` declares it."""
    return {"run_id": str(langgraph_run_id),
            "status": states.langgraph_status(run.state, superseded=superseded)}


def keepalive_seconds() -> float:
    """``PLANWATCH_STREAM_KEEPALIVE_SECONDS`` (0 or less: no heartbeats; 5 by default, as
    LangGraph's server)."""
    return float(planwatch_setting("STREAM_KEEPALIVE_SECONDS"))


async def with_heartbeats(source: AsyncIterator[bytes], every: float,
                          beat: bytes = HEARTBEAT) -> AsyncIterator[bytes]:
    """``source``'s parts, and ``beat`` every ``every`` seconds between them, whatever
    they are (LangGraph's server sends its heartbeat every 5 s, events or not).

    ``source`` runs in a task of its own that hands each part over (one at a time), so
    waiting for a part with a timeout never cancels ``source`` midway; closing this
    iterator cancels that task and closes ``source``.
    """
    parts: asyncio.Queue[tuple[bool, Any]] = asyncio.Queue(maxsize=1)

    async def pump() -> None:
        try:
            async for part in source:
                await parts.put((True, part))
            await parts.put((False, None))
        except Exception as exc:  # the stream's own failure reaches its reader
            await parts.put((False, exc))

    task = asyncio.ensure_future(pump())
    loop = asyncio.get_running_loop()
    due = loop.time() + every
    try:
        while True:
            try:
                more, part = await asyncio.wait_for(parts.get(),
                                                    timeout=max(0.0, due - loop.time()))
            except TimeoutError:
                due = max(due + every, loop.time())
                yield beat
                continue
            if not more:
                if isinstance(part, Exception):
                    raise part
                return
            yield part
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        with contextlib.suppress(Exception):
            await source.aclose()  # type: ignore[attr-defined]


SAVE_WAITS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2)
"""Pauses between reads of a checkpoint its event names but the saver has not saved yet.

The executor writes such an event once its checkpoint is saved, or after a second if the
save is slower (seen with 200 runs started at once): then the stream reads again, ~6 s in
all, rather than send a ``values`` part without the state."""


READ_RETRIES = (0.1, 0.3, 0.9)
"""Pauses before a failed checkpoint read is tried again (a dropped pooled connection)."""


async def _aread_checkpoint(maker: PartMaker, event: dict[str, Any]) -> CheckpointView | None:
    """:meth:`PartMaker.checkpoint_of` off the loop, tried again after a transient error."""
    read = database_sync_to_async(maker.checkpoint_of)
    for pause in READ_RETRIES:
        try:
            return await read(event)
        except Exception as exc:
            if not transient(exc):
                raise
            logger.warning("reading checkpoint %s failed (%s); reading again",
                           event.get("checkpoint_id"), exc)
        await asyncio.sleep(pause)
    return await read(event)


async def _asaved(maker: PartMaker, event: dict[str, Any]) -> CheckpointView | None:
    """The checkpoint ``event`` names, read again while its save may be late (an event
    written in the last seconds; durability "exit" saves only the last checkpoint)."""

    async def read(event: dict[str, Any]) -> CheckpointView | None:
        return await _aread_checkpoint(maker, event)

    view = await read(event)
    written = event.get("created_at")
    if view is not None or not written or planwatch_setting("DURABILITY") == "exit" or (
            datetime.now(UTC) - datetime.fromisoformat(written)).total_seconds() > 10:
        return view
    for pause in SAVE_WAITS:
        if view is not None:
            break
        await asyncio.sleep(pause)
        view = await read(event)
    return view


class StreamCut(RequestAborted):
    """A stream ended before its run stopped: this process drains (``stop_following``).

    Its response is left unfinished (Django ends a request on ``RequestAborted`` without
    the last, empty body message), so the client sees the connection break when the
    process closes it, and langgraph-sdk reconnects with ``Last-Event-ID`` whatever the
    run's status. A stream that finished cleanly instead makes the SDK ask the run: one
    that stopped meanwhile (its last events written after the cut) was not resumed, and
    its client never got those events.
    """


def aevents(run_id: UUID, *, modes: Iterable[str], subgraphs: bool, after: int,
            metadata: bool = True, keepalive: float | None = None,
            langgraph_run_id: UUID | None = None, upto: int | None = None,
            written: Run | None = None) -> AsyncIterator[bytes]:
    """The run's events after seq ``after`` as SSE, until it stops and all were sent (see
    :func:`~dashboard.runs.follow.follow`); a failed run's last event is ``error``, another's
    ``end`` (:func:`run_end`); a
    ``: heartbeat`` comment every ``keepalive`` seconds (default :func:`keepalive_seconds`).
    ``langgraph_run_id``: the LangGraph run of the run streamed (its id in the parts; the
    run's own by default); ``upto``: the last seq of one that ended (another went on after
    it), streamed as it was, not followed; ``written``: the run as the request just wrote it,
    not read again while nothing happened to it (``follow``'s). Raises :class:`StreamCut` if
    this process stops following first (it drains)."""
    events = _aevents(run_id, modes=modes, subgraphs=subgraphs, after=after,
                      metadata=metadata, langgraph_run_id=langgraph_run_id or run_id,
                      upto=upto, written=written)
    every = keepalive_seconds() if keepalive is None else keepalive
    return with_heartbeats(events, every) if every > 0 else events


def stream_failed(exc: BaseException, last_seq: int) -> dict[str, str]:
    """The ``error`` event of a stream whose database read failed mid-way: what failed,
    and how to resume (the run itself goes on)."""
    return {"error": type(exc).__name__,
            "message": f"the stream could not read the run's events ({exc}); the run is not "
                       f"affected: join it again with Last-Event-ID {last_seq} to resume"}


async def _aevents(run_id: UUID, *, modes: Iterable[str], subgraphs: bool, after: int,
                   metadata: bool, langgraph_run_id: UUID, upto: int | None,
                   written: Run | None = None) -> AsyncIterator[bytes]:
    if metadata:
        yield sse("metadata", {"run_id": str(langgraph_run_id), "attempt": 1})
    sent = after
    # closed with this stream, not whenever the collector finds it: its follower leaves
    # the run's doorbell then (a stream closed at a part left it for the loop's finalizer)
    parts = _aparts(run_id, modes=modes, subgraphs=subgraphs, after=after,
                    langgraph_run_id=langgraph_run_id, upto=upto, written=written)
    try:
        async with contextlib.aclosing(parts):
            async for part, seq in parts:
                yield part
                sent = seq or sent
    except StreamCut:
        raise
    except Exception as exc:  # after the response started: end it with an error, not hang
        logger.warning("stream of run %s failed after seq %s", run_id, sent, exc_info=True)
        yield sse("error", stream_failed(exc, sent))


async def _aparts(run_id: UUID, *, modes: Iterable[str], subgraphs: bool, after: int,
                  langgraph_run_id: UUID, upto: int | None, written: Run | None = None
                  ) -> AsyncGenerator[tuple[bytes, int | None]]:
    """The stream's SSE parts, each with the seq it carries (None: no id)."""
    modes = set(modes)
    maker: PartMaker | None = None
    if upto is not None:  # a LangGraph run that ended: its events, read once
        run, events = await aread(None, run_id, after)
        if run is not None:
            maker = PartMaker(run, modes, subgraphs, langgraph_run_id)
            async for item in _aevent_parts(maker, [e for e in events if e["seq"] <= upto]):
                yield item
            yield sse("end", run_end(run, langgraph_run_id, superseded=True)), None
        return
    stopped = False
    steps = follow(run_id, after, until=_stopped,
                   tokens=bool(CHUNK_MODES.intersection(modes)), written=written)
    async with contextlib.aclosing(steps):
        async for step in steps:
            stopped = step.last
            if maker is None:  # the first step is read from the log
                if step.run is None:
                    return  # the run was deleted
                maker = PartMaker(step.run, modes, subgraphs, langgraph_run_id)
            if step.tokens:
                for name, data in maker.token_parts(step.tokens):
                    yield sse(name, data), None
                continue
            async for item in _aevent_parts(maker, step.events):
                yield item
            if step.last and step.run is not None:
                if shapes.outcome_said(step.run) is not None:  # how it ended, in the chat
                    final = await _afinal_state(step.run)
                    for name, data in maker.ending_parts(step.run, final["values"]):
                        yield sse(name, to_jsonable(data)), None
                # a failed run's stream ends with its error (as LangGraph's server ends it);
                # another's with ``end``, so a client knows the run stopped without asking
                yield (sse("error", run_error(step.run.error_message))
                       if step.run.status == Run.Status.FAILED
                       else sse("end", run_end(step.run, langgraph_run_id,
                                               superseded=False))), None
    if not stopped:  # (the follower gives a last step unless this process drains)
        raise StreamCut(f"this process drains: the stream of run {run_id} is cut, to be "
                        "resumed on another process")


@database_sync_to_async
def _afinal_state(run: Run) -> dict[str, Any]:
    """The state ``run`` ended with, as a thread's state is read (how it ended, said last)."""
    return shapes.run_state(run, str(run.conversation_id))


async def _aevent_parts(maker: PartMaker, events: list[dict[str, Any]]
                        ) -> AsyncIterator[tuple[bytes, int | None]]:
    """The SSE parts of ``events``, each with the seq it carries (None: no id)."""
    for event in events:
        view = await _asaved(maker, event) if maker.reads_saver(event) else None
        parts = maker.parts(event, view)
        if parts:  # (most events make no part of a stream's modes: those are not sent)
            instruments.event_delivered(event["created_at"])
        for index, (name, data) in enumerate(parts):
            last = index == len(parts) - 1
            yield (sse(name, to_jsonable(data), str(event["seq"]) if last else None),
                   event["seq"] if last else None)


async def astopped(run_id: UUID, *, cut: bool = False) -> None:
    """Wait until the run stops, or until this process drains: then return at once, or
    with ``cut`` raise :class:`StreamCut` (a response that waits for the run's end is cut,
    so its client asks again elsewhere rather than take the run for stopped)."""
    try:
        async for _ in aevents(run_id, modes=(), subgraphs=False, after=0, metadata=False,
                               keepalive=0):
            pass
    except StreamCut:
        if cut:
            raise


_CANCELLING: set[asyncio.Future[None]] = set()
"""Cancellations scheduled by closed streams, held until done (a task nobody holds may be
collected before it runs)."""


async def cancel_on_disconnect(events: AsyncIterator[bytes],
                               cancel: Callable[[], Awaitable[None]]) -> AsyncIterator[bytes]:
    """``events``, and ``cancel()`` scheduled if the stream is closed before its end: its
    client disconnected (Django cancels a streaming response then), ``on_disconnect:
    "cancel"``. A stream that ends (the run stopped) or is cut (:class:`StreamCut`)
    cancels nothing."""
    ended = False
    try:
        async for part in events:
            yield part
        ended = True
    except StreamCut:  # this process drains: the client will resume the stream elsewhere
        ended = True
        raise
    finally:
        if not ended:
            task = asyncio.ensure_future(cancel())
            _CANCELLING.add(task)
            task.add_done_callback(_CANCELLING.discard)
