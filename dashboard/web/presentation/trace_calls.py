"""Model calls as the trace shows them: a call's two events merged into one record.

A call is logged as ``model_started`` (model, purpose, the messages sent) and
``model_finished`` (the answer, tokens as the model reported them, cost, latency). The
timeline row of either event, and the detail of the node it ran in, show the call as a
conversation; until its end arrives it says "calling <model>…".
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from dashboard import selectors
from dashboard.models import RunEvent
from dashboard.runs.record import event_dict
from dashboard.web.presentation.waterfall import (
    MODEL_FINISHED,
    MODEL_KINDS,
    MODEL_STARTED,
    call_label,
    seconds_text,
    tokens_text,
)

FOLD_CHARS = 600
"""A text longer than this (or than ``FOLD_LINES`` lines) is folded behind its start."""
FOLD_LINES = 12


@dataclass(frozen=True)
class Text:
    """A text to show: pretty JSON when it is JSON, folded behind its start when long."""

    body: str
    json: bool = False

    @property
    def folded(self) -> bool:
        """Whether it is long enough to fold."""
        return len(self.body) > FOLD_CHARS or self.body.count("\n") > FOLD_LINES

    @property
    def head(self) -> str:
        """What a folded text shows before it is opened."""
        first = self.body[:160].split("\n", 1)[0]
        return f"{first}… ({len(self.body):,} characters)"


def as_text(value: Any) -> Text:
    """A message's content (a string, or parts) as a :class:`Text`."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return Text(pretty(json.loads(stripped)), json=True)
            except ValueError:
                pass
        return Text(value)
    return Text(pretty(value), json=True)


def pretty(value: Any) -> str:
    """JSON for people: indented, non-ASCII kept, anything odd shown as text."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Message:
    """One message of the conversation sent to the model."""

    role: str
    content: Text
    tool_calls: Text | None = None


@dataclass
class ModelCall:
    """One model call, from its start and (once it arrived) its end."""

    call_id: str
    started: dict[str, Any] = field(default_factory=dict)
    finished: dict[str, Any] | None = None
    seq: int = 0
    node: str = ""
    duration_ms: float | None = None

    @property
    def label(self) -> str:
        """The model's name (or the purpose, when no model was named)."""
        return call_label(self.finished or self.started)

    def _get(self, key: str) -> Any:
        for part in (self.finished, self.started):
            if part and part.get(key) is not None:
                return part[key]
        return None

    @property
    def model(self) -> str:
        """The model's name, or "model not named"."""
        return str(self._get("model") or "model not named")

    @property
    def provider(self) -> str:
        """Who serves it ("" when unknown)."""
        return str(self._get("provider") or "")

    @property
    def purpose(self) -> str:
        """Why the graph called it ("" when it did not say)."""
        return str(self._get("purpose") or "")

    @property
    def kind(self) -> str:
        """``chat`` or ``llm``."""
        return str(self._get("kind") or "")

    @property
    def messages(self) -> list[Message]:
        """The prompt as a conversation."""
        out = []
        for m in self.started.get("messages") or ():
            if not isinstance(m, dict):
                out.append(Message("?", as_text(m)))
                continue
            calls = m.get("tool_calls")
            out.append(Message(str(m.get("role") or "?"), as_text(m.get("content") or ""),
                               as_text(calls) if calls else None))
        return out

    @property
    def output(self) -> dict[str, Any]:
        """The answer's parts (empty until the call ended)."""
        value = (self.finished or {}).get("output")
        return value if isinstance(value, dict) else {}

    @property
    def answer(self) -> Text | None:
        """The answer's text, if it has one."""
        text = self.output.get("text")
        return as_text(text) if text else None

    @property
    def tool_calls(self) -> Text | None:
        """The tool calls the model asked for, as JSON."""
        calls = self.output.get("tool_calls")
        return as_text(calls) if calls else None

    @property
    def structured(self) -> Text | None:
        """The structured output, as JSON."""
        value = self.output.get("structured")
        return Text(pretty(value), json=True) if value is not None else None

    @property
    def tokens(self) -> str:
        """Tokens as the model reported them, or "tokens not reported"."""
        return tokens_text((self.finished or {}).get("usage"))

    @property
    def cost(self) -> str:
        """The cost (``0.0012 USD``), or "cost unknown"."""
        cost = (self.finished or {}).get("cost")
        total = cost.get("total") if isinstance(cost, dict) else None
        if not isinstance(total, (int, float)):
            return "cost unknown"
        currency = cost.get("currency") if isinstance(cost, dict) else ""
        return f"{total:.6f}".rstrip("0").rstrip(".") + f" {currency or ''}".rstrip()

    @property
    def latency(self) -> str:
        """How long it took (with the time to the first token when streamed)."""
        finished = self.finished or {}
        ms = self.duration_ms if self.duration_ms is not None else finished.get("latency_ms")
        if not isinstance(ms, (int, float)):
            return ""
        text = seconds_text(ms / 1000)
        ttft = finished.get("ttft_ms")
        return f"{text} (first token {seconds_text(ttft / 1000)})" \
            if isinstance(ttft, (int, float)) else text

    @property
    def error(self) -> str:
        """The error the call ended with ("" when none)."""
        return str((self.finished or {}).get("error") or "")

    @property
    def truncated(self) -> bool:
        """Whether the recorder cut its texts to the size cap."""
        return bool(self._get("truncated"))


def model_calls(events: Iterable[RunEvent | Mapping[str, Any]]) -> list[ModelCall]:
    """The calls in ``events`` (any order of their kinds), in the order they started."""
    calls: dict[str, ModelCall] = {}
    for event in events:
        e = event if isinstance(event, Mapping) else event_dict(event)
        if e["kind"] not in MODEL_KINDS:
            continue
        payload = e["payload"] if isinstance(e["payload"], dict) else {}
        call_id = str(payload.get("call_id") or f"seq-{e['seq']}")
        call = calls.setdefault(call_id, ModelCall(call_id, seq=e["seq"], node=e["node"]))
        if e["kind"] == MODEL_STARTED:
            call.started, call.seq = payload, e["seq"]
        elif e["kind"] == MODEL_FINISHED:
            call.finished, call.duration_ms = payload, e["duration_ms"]
    return list(calls.values())


def node_model_calls(*, run_id: UUID | str, event: RunEvent) -> list[ModelCall]:
    """The model calls made in the node execution (task) that ``event`` belongs to."""
    if not event.task_id:
        return []
    return model_calls(selectors.run_events(run_id=run_id).filter(
        kind__in=MODEL_KINDS, namespace=event.namespace, task_id=event.task_id))


def model_call_of(*, run_id: UUID | str, event: RunEvent) -> ModelCall:
    """The call a ``model_started`` or ``model_finished`` event belongs to, both halves."""
    call_id = (event.payload or {}).get("call_id") if isinstance(event.payload, dict) else None
    rows = selectors.run_events(run_id=run_id).filter(
        kind__in=MODEL_KINDS, namespace=event.namespace, task_id=event.task_id)
    calls = model_calls(r for r in rows if r.seq == event.seq
                        or (call_id and isinstance(r.payload, dict)
                            and r.payload.get("call_id") == call_id))
    return calls[0] if calls else ModelCall(str(call_id or ""), seq=event.seq)
