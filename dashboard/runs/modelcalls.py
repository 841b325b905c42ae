"""Model calls as events: a LangChain callback handler on the run's config.

The executor adds one :class:`ModelCallRecorder` per execution to the config it streams
the graph with, so every chat model or LLM a node calls (the LLM port's LangChain
adapter, the scripted model, a ``langgraph.json`` graph's own ``ChatOpenAI``) reports its
start, tokens and end here, sync or async, streamed or not. Each call becomes two events
of the run's gapless log, numbered by its :class:`~dashboard.runs.execution.EventWriter`:
``model_started`` (the messages) and ``model_finished`` (the answer, usage as reported,
cost from ``PLANWATCH_MODEL_PRICES``, latency, time to first token, error). The node,
task and namespace come from the metadata LangGraph gives each task's config; a graph
names a call's purpose with the ``planwatch_purpose`` metadata key.

A run whose LangGraph client streams its messages (``Run.stream_tokens``) gets a recorder
that also hands each chunk of a chat model's answer to the run's
:class:`~dashboard.runs.tokens.TokenBell` (never to the log): :func:`model_call_recorder`
then makes one that LangChain's chat models stream to, as they stream to LangGraph's own
``messages`` handler (a call tagged ``nostream`` is not streamed in the messages modes,
only as ``events``, as ``astream_events`` streams every call).

The payload is a contract (docs/architecture.md, "Model calls"): the trace, the export
and the OpenTelemetry exporter read it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import (
    ChatGeneration,
    ChatGenerationChunk,
    GenerationChunk,
    LLMResult,
)
from langchain_core.tracers._streaming import _StreamingCallbackHandler
from langchain_core.utils.utils import LC_ID_PREFIX

from dashboard.models import RunEvent
from dashboard.runs import instruments
from dashboard.runs.jsonsafe import to_jsonable
from planner.llm import PURPOSE_METADATA

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from dashboard.runs.execution import EventWriter
    from dashboard.runs.tokens import TokenBell

Kind = RunEvent.Kind


CANCELLED = "CancelledError: the run was cancelled"
"""A model call's error when its run was cancelled while it waited for the answer."""

ROLES = {"system": "system", "human": "human", "ai": "ai", "tool": "tool",
         "AIMessageChunk": "ai", "function": "tool", "developer": "system"}


@dataclass(frozen=True)
class ContentPolicy:
    """What of a call's texts is kept: all of it up to ``limit`` characters, or none."""

    keep: bool = True
    limit: int = 20_000

    def cut(self, text: str) -> tuple[str, bool]:
        """``text`` as stored, and whether it was cut (or dropped)."""
        if not self.keep:
            return "", bool(text)
        if len(text) > self.limit:
            return text[: self.limit], True
        return text, False


def cost_of(usage: Mapping[str, Any] | None, model: str | None,
            prices: Mapping[str, Mapping[str, float]]) -> dict[str, Any] | None:
    """A call's cost in USD from the price table; None for an unpriced model or no usage."""
    price = prices.get(model or "")
    if price is None or not usage:
        return None
    tokens_in, tokens_out = usage.get("input_tokens"), usage.get("output_tokens")
    if tokens_in is None and tokens_out is None:
        return None
    cost_in = (tokens_in or 0) * price["input"] / 1_000_000
    cost_out = (tokens_out or 0) * price["output"] / 1_000_000
    return {"input": cost_in, "output": cost_out, "total": cost_in + cost_out,
            "currency": "USD"}


def usage_of(response: LLMResult) -> dict[str, int | None] | None:
    """Token usage as the model reported it (None when it reported none; never 0 for absent)."""
    found: dict[str, Any] = {}
    message = _message(response)
    reported = getattr(message, "usage_metadata", None) if message is not None else None
    if reported:
        found = {"input_tokens": reported.get("input_tokens"),
                 "output_tokens": reported.get("output_tokens"),
                 "total_tokens": reported.get("total_tokens"),
                 "cached_tokens": (reported.get("input_token_details") or {}).get("cache_read")}
    else:
        raw = (response.llm_output or {}).get("token_usage") or {}
        if raw:
            found = {"input_tokens": raw.get("prompt_tokens"),
                     "output_tokens": raw.get("completion_tokens"),
                     "total_tokens": raw.get("total_tokens"),
                     "cached_tokens": (raw.get("prompt_tokens_details") or {}).get(
                         "cached_tokens")}
    usage = {k: int(v) if isinstance(v, int | float) else None for k, v in found.items()}
    if not any(v is not None for v in usage.values()):
        return None
    return usage


def _message(response: LLMResult) -> BaseMessage | None:
    for batch in response.generations:
        for generation in batch:
            if isinstance(generation, ChatGeneration):
                return generation.message
    return None


def _text(content: Any) -> str:
    """A message's content as text (content blocks joined; other blocks as JSON)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            block if isinstance(block, str)
            else str(block.get("text", "")) if isinstance(block, dict) and "text" in block
            else json.dumps(to_jsonable(block))
            for block in content)
    return json.dumps(to_jsonable(content))


def _tool_calls(message: Any, policy: ContentPolicy) -> list[dict[str, Any]]:
    calls = getattr(message, "tool_calls", None) or []
    return [{"name": c.get("name"), "id": c.get("id"),
             **({"args": to_jsonable(c.get("args"))} if policy.keep else {})}
            for c in calls]


def where_from(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The node, namespace, task and step of a call, from LangGraph's task metadata."""
    metadata = metadata or {}
    task_ns = str(metadata.get("langgraph_checkpoint_ns") or "")
    *outer, own = task_ns.split("|") if task_ns else [""]
    step = metadata.get("langgraph_step")
    return {"node": str(metadata.get("langgraph_node") or ""),
            "namespace": "|".join(outer),
            "task_id": own.rpartition(":")[2],
            "step": step if isinstance(step, int) else None}


NOSTREAM = frozenset(("nostream", "langsmith:nostream"))
"""The tags that keep a call's chunks from LangGraph's ``messages`` stream: its
``TAG_NOSTREAM``, and the name Agent Chat UI documents (``langsmith:nostream``)."""


def token_meta(metadata: Mapping[str, Any], tags: Sequence[str] | None) -> dict[str, Any]:
    """A streamed call's metadata as LangGraph's ``messages`` mode sends it beside each
    chunk: the call's own (LangGraph's task keys, the model's ``ls_*``, the run's), and its
    tags but LangGraph's ``seq:step`` bookkeeping."""
    meta = to_jsonable({k: v for k, v in metadata.items() if not k.startswith("__")})
    user_tags = [t for t in tags or () if not t.startswith("seq:step")]
    if user_tags:
        meta["tags"] = user_tags
    return dict(meta)


@dataclass
class _Streamed:
    """A call whose chunks are told: the id they carry, how many were told, the metadata
    the first carries."""

    meta: dict[str, Any]
    call: str
    """The call's LangChain run id (an ``events`` stream's ``run_id`` of its events)."""
    hidden: bool = False
    """Tagged ``nostream``: its chunks are for ``events`` streams only."""
    message_id: str = ""
    told: int = 0


@dataclass
class _Call:
    """A call in flight: what its finished event repeats, and when it began."""

    where: dict[str, Any]
    head: dict[str, Any]
    began: float
    began_at: datetime
    """The same moment on the wall clock (its events' ``at``: start, start + latency)."""
    first_token: float | None = None
    streamed: _Streamed | None = None
    """Its chunks are told to the run's watchers (a run whose client streams messages)."""


class ModelCallRecorder(AsyncCallbackHandler):
    """Records each model call of one execution as ``model_started``/``model_finished`` events.

    Callbacks of a sync node arrive on its worker thread: they are handed to the executor's
    loop, where the writer lives, in the order they came.
    """

    run_inline = True  # in order, in the caller's context: a call's start before its end
    raise_error = False  # recording never fails the model call

    def __init__(self, writer: EventWriter, *, prices: Mapping[str, Mapping[str, float]],
                 policy: ContentPolicy, loop: asyncio.AbstractEventLoop | None = None,
                 tokens: TokenBell | None = None) -> None:
        """Record into ``writer`` (on ``loop``, the executor's, by default the running one);
        tell each chunk of a streamed chat model's answer to ``tokens``, if given."""
        self.writer = writer
        self.prices = prices
        self.policy = policy
        self.tokens = tokens
        self.loop = loop or asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self.calls: dict[uuid.UUID, _Call] = {}

    # -- LangChain's hooks ----------------------------------------------------------

    async def on_chat_model_start(self, serialized: dict[str, Any],
                                  messages: list[list[BaseMessage]], *, run_id: uuid.UUID,
                                  parent_run_id: uuid.UUID | None = None,
                                  tags: list[str] | None = None,
                                  metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """A chat model was called: record its messages."""
        shown = [self._message(m) for m in (messages[0] if messages else [])]
        call = self._start(run_id, "chat", metadata, kwargs, shown)
        if self.tokens is not None and metadata:
            call.streamed = _Streamed(token_meta(metadata, tags), str(run_id),
                                      hidden=bool(NOSTREAM.intersection(tags or ())))

    async def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], *,
                           run_id: uuid.UUID, parent_run_id: uuid.UUID | None = None,
                           tags: list[str] | None = None,
                           metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """A text LLM was called: record its prompt as a human message."""
        shown = [self._message_of("human", p) for p in prompts[:1]]
        self._start(run_id, "llm", metadata, kwargs, shown)

    async def on_llm_new_token(self, token: str | list[str | dict[str, Any]], *,
                               chunk: GenerationChunk | ChatGenerationChunk | None = None,
                               run_id: uuid.UUID, parent_run_id: uuid.UUID | None = None,
                               tags: list[str] | None = None, **kwargs: Any) -> None:
        """A streamed call's token arrived: the first one sets the time to first token; a
        chat model's chunk is told to the run's watchers, if they stream its messages."""
        call = self.calls.get(run_id)
        if call is None:
            return
        if call.first_token is None:
            call.first_token = time.perf_counter()
        streamed = call.streamed
        if streamed is None or not isinstance(chunk, ChatGenerationChunk):
            return
        # every chunk carries the first's id (LangChain's own run id, unless the provider
        # named the message): a client joins the chunks of one id into one message
        if not streamed.message_id:
            streamed.message_id = chunk.message.id or f"{LC_ID_PREFIX}-{run_id}"
        item: dict[str, Any] = {
            "id": streamed.message_id, "i": streamed.told, "ns": call.where["namespace"],
            "chunk": {**to_jsonable(chunk.message), "id": streamed.message_id}}
        if not streamed.told:
            item["meta"] = streamed.meta
            item["call"] = streamed.call
            if streamed.hidden:
                item["hidden"] = True
        streamed.told += 1
        self._tell(item)

    async def on_llm_end(self, response: LLMResult, *, run_id: uuid.UUID,
                         parent_run_id: uuid.UUID | None = None, **kwargs: Any) -> None:
        """A call answered: record the answer, its usage and cost."""
        call = self.calls.pop(run_id, None)
        if call is None:
            return
        message = _message(response)
        streamed = call.streamed
        if streamed is not None and streamed.told and message is not None \
                and message.id and message.id != streamed.message_id:
            # its chunks' id is not the message's (a provider's id came with a later one)
            self._tell({"id": streamed.message_id, "final": message.id})
        if message is not None:
            text = _text(message.content)
            tool_calls = _tool_calls(message, self.policy)
            parsed = message.additional_kwargs.get("parsed")
            model = call.head["model"] or (message.response_metadata or {}).get("model_name")
        else:
            first = next((g for batch in response.generations for g in batch), None)
            text, tool_calls, parsed = (first.text if first else ""), [], None
            model = call.head["model"] or (response.llm_output or {}).get("model_name")
        shown, cut = self.policy.cut(text)
        output: dict[str, Any] = {
            "text": shown, "tool_calls": tool_calls,
            "structured": to_jsonable(parsed) if parsed is not None and self.policy.keep
            else None}
        if cut:
            output["truncated"] = True
        usage = usage_of(response)
        self._finish(run_id, call, {**call.head, "model": model}, output=output, usage=usage,
                     cost=cost_of(usage, model, self.prices), error=None)

    async def on_llm_error(self, error: BaseException, *, run_id: uuid.UUID,
                           parent_run_id: uuid.UUID | None = None, **kwargs: Any) -> None:
        """A call failed: record the error (without content kept, only its class: a
        provider's message may quote the prompt)."""
        call = self.calls.pop(run_id, None)
        if call is None:
            return
        if isinstance(error, asyncio.CancelledError):  # its run was cancelled
            self._finish(run_id, call, call.head, output=None, usage=None, cost=None,
                         error=CANCELLED)
            return
        message, _ = self.policy.cut(str(error))
        self._finish(run_id, call, call.head, output=None, usage=None, cost=None,
                     error=f"{type(error).__name__}: {message}" if message
                     else type(error).__name__)

    async def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *,
                             run_id: uuid.UUID, parent_run_id: uuid.UUID | None = None,
                             tags: list[str] | None = None,
                             metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """A runnable began: if it is a task of the graph, when the task began."""
        if metadata and metadata.get("langgraph_checkpoint_ns"):
            self.writer.clock.start(where_from(metadata)["task_id"], run_id, timezone.now())

    async def on_chain_end(self, outputs: Any, *, run_id: uuid.UUID,
                           parent_run_id: uuid.UUID | None = None, **kwargs: Any) -> None:
        """A runnable ended: if it was a task, when the task ended."""
        self.writer.clock.end(run_id, timezone.now())

    async def on_chain_error(self, error: BaseException, *, run_id: uuid.UUID,
                             parent_run_id: uuid.UUID | None = None, **kwargs: Any) -> None:
        """A runnable raised (an interrupt too): if it was a task, when the task ended."""
        self.writer.clock.end(run_id, timezone.now())

    def cancel_in_flight(self) -> None:
        """The run was cancelled: each call still in flight ends cancelled (its answer
        never came; what it cost is unknown)."""
        for run_id, call in list(self.calls.items()):
            del self.calls[run_id]
            self._finish(run_id, call, call.head, output=None, usage=None, cost=None,
                         error=CANCELLED)

    # -- events -----------------------------------------------------------------------

    def _start(self, run_id: uuid.UUID, kind: str, metadata: dict[str, Any] | None,
               kwargs: Mapping[str, Any], messages: list[dict[str, Any]]) -> _Call:
        metadata = metadata or {}
        params = kwargs.get("invocation_params") or {}
        model = metadata.get("ls_model_name") or params.get("model") or params.get(
            "model_name")
        head = {"call_id": str(run_id), "model": str(model) if model else None,
                "provider": metadata.get("ls_provider"),
                "purpose": metadata.get(PURPOSE_METADATA), "kind": kind}
        call = _Call(where=where_from(metadata), head=head, began=time.perf_counter(),
                     began_at=timezone.now())
        self.calls[run_id] = call
        payload = {**head, "messages": messages}
        if not self.policy.keep:
            payload["redacted"] = True
        self._emit({"kind": Kind.MODEL_STARTED, **call.where, "payload": payload,
                    "at": call.began_at})
        return call

    def _finish(self, run_id: uuid.UUID, call: _Call, head: dict[str, Any], *,
                output: dict[str, Any] | None, usage: dict[str, Any] | None,
                cost: dict[str, Any] | None, error: str | None) -> None:
        now = time.perf_counter()
        latency = (now - call.began) * 1000
        ttft = (call.first_token - call.began) * 1000 if call.first_token else None
        payload = {**head,
                   "output": output or {"text": "", "tool_calls": [], "structured": None},
                   "usage": usage, "cost": cost, "latency_ms": latency, "ttft_ms": ttft,
                   "error": error}
        if not self.policy.keep:
            payload["redacted"] = True
        instruments.model_call(head.get("model"), usage, cost)
        self._emit({"kind": Kind.MODEL_FINISHED, **call.where, "duration_ms": latency,
                    "payload": payload, "at": call.began_at + timedelta(milliseconds=latency)})

    def _emit(self, fields: dict[str, Any]) -> None:
        """Number and buffer the event on the executor's loop (from any thread), stamped
        with the moment of the callback (the hop to the loop may take a while)."""
        fields.setdefault("at", timezone.now())
        if threading.get_ident() == self.loop_thread:
            self._add(fields)
        else:
            self.loop.call_soon_threadsafe(self._add, fields)

    def _add(self, fields: dict[str, Any]) -> None:
        self.writer.add(fields)
        self.writer.flush_behind()  # a call shows as it starts, not at the next node

    def _tell(self, item: dict[str, Any]) -> None:
        """Hand a chunk's item to the run's token bell on the executor's loop (from any
        thread; after the events the callbacks before it emitted)."""
        if threading.get_ident() == self.loop_thread:
            self._add_token(item)
        else:
            self.loop.call_soon_threadsafe(self._add_token, item)

    def _add_token(self, item: dict[str, Any]) -> None:
        assert self.tokens is not None
        # told once the events numbered before it are (a node's start, this call's start)
        self.tokens.add(item, after=self.writer.next_seq - 1)

    def _message(self, message: BaseMessage) -> dict[str, Any]:
        shown = self._message_of(ROLES.get(message.type, message.type), _text(message.content))
        calls = _tool_calls(message, self.policy)
        if calls:
            shown["tool_calls"] = calls
        return shown

    def _message_of(self, role: str, text: str) -> dict[str, Any]:
        content, cut = self.policy.cut(text)
        shown: dict[str, Any] = {"role": role, "content": content}
        if cut:
            shown["truncated"] = True
        return shown


class StreamingModelCallRecorder(ModelCallRecorder, _StreamingCallbackHandler[Any]):
    """A recorder chat models stream to: LangChain streams a model's answer (and calls
    ``on_llm_new_token`` for each chunk) when a handler of this kind listens, as it does
    for LangGraph's ``messages`` stream mode. It passes the outputs it is shown through."""

    def tap_output_aiter(self, run_id: uuid.UUID, output: AsyncIterator[Any]
                         ) -> AsyncIterator[Any]:
        """The output as it is (nothing is tapped here)."""
        return output

    def tap_output_iter(self, run_id: uuid.UUID, output: Iterator[Any]) -> Iterator[Any]:
        """The output as it is (nothing is tapped here)."""
        return output


def model_call_recorder(writer: EventWriter, *, prices: Mapping[str, Mapping[str, float]],
                        policy: ContentPolicy, tokens: TokenBell | None = None
                        ) -> ModelCallRecorder:
    """An execution's recorder: one chat models stream to when ``tokens`` is given (its
    run's client streams messages), else one they answer whole to, as they choose."""
    cls = ModelCallRecorder if tokens is None else StreamingModelCallRecorder
    return cls(writer, prices=prices, policy=policy, tokens=tokens)


def messages_of(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The model calls of a run's events (dicts in event form), start and end joined.

    One dict per call, in the order they started: the ``model_finished`` payload (or the
    start's, for a call still in flight) with ``messages``, ``node``, ``namespace``,
    ``task_id``, ``step``, and the seqs and times of its two events.
    """
    calls: dict[str, dict[str, Any]] = {}
    for event in events:
        kind = event["kind"]
        if kind not in (Kind.MODEL_STARTED, Kind.MODEL_FINISHED):
            continue
        payload = event["payload"] or {}
        call = calls.setdefault(str(payload.get("call_id")), {
            "node": event["node"], "namespace": event["namespace"],
            "task_id": event["task_id"], "step": event["step"], "messages": [],
            "started_seq": None, "started_at": None, "finished_seq": None,
            "finished_at": None, "finished": False})
        if kind == Kind.MODEL_STARTED:
            call.update({**payload, "started_seq": event["seq"],
                         "started_at": event.get("at") or event["created_at"]})
        else:
            call.update({**{k: v for k, v in payload.items() if k != "messages"},
                         "finished_seq": event["seq"],
                         "finished_at": event.get("at") or event["created_at"],
                         "finished": True})
    return list(calls.values())
