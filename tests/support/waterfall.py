"""Run logs written by hand for the waterfall and the figures: events at chosen seconds
into a run, folded, or stored as the recorder stores them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from dashboard.models import Run, RunEvent
from dashboard.web.presentation.waterfall import WaterfallFold

T0 = datetime(2026, 11, 5, 12, 0, 0, tzinfo=UTC)
"""When the hand-written runs start."""


class Log:
    """Events as the recorder writes them, numbered, at chosen seconds into the run."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, at: float, kind: str, node: str = "", task_id: str = "", ns: str = "",
            step: int | None = None, payload: dict[str, Any] | None = None,
            duration_ms: float | None = None) -> Log:
        self.events.append({
            "seq": len(self.events) + 1, "kind": kind, "node": node, "namespace": ns,
            "step": step, "task_id": task_id, "checkpoint_id": "", "payload": payload or {},
            "duration_ms": duration_ms,
            "created_at": (T0 + timedelta(seconds=at)).isoformat()})
        return self

    def node(self, start: float, end: float, node: str, task_id: str, step: int,
             update: dict[str, Any] | None = None, ns: str = "") -> Log:
        self.add(start, "node_started", node, task_id, ns, step)
        return self.add(end, "node_finished", node, task_id, ns, step,
                        {"update": update or {}}, duration_ms=(end - start) * 1000)

    def call(self, start: float, end: float | None, node: str, task_id: str, call_id: str,
             model: str = "gpt-test", answer: str = "ok", usage: Any = None,
             messages: list[Any] | None = None, cost: Any = None) -> Log:
        base = {"call_id": call_id, "model": model, "provider": "openai",
                "purpose": "acquisition.decide", "kind": "chat"}
        self.add(start, "model_started", node, task_id, payload={
            **base, "messages": messages or [{"role": "human", "content": "which field?"}]})
        if end is not None:
            self.add(end, "model_finished", node, task_id, payload={
                **base, "output": {"text": answer, "tool_calls": [], "structured": None},
                "usage": usage, "cost": cost, "latency_ms": (end - start) * 1000,
                "ttft_ms": None, "error": None}, duration_ms=(end - start) * 1000)
        return self


def fold_of(log: Log, **kw: Any) -> WaterfallFold:
    """The waterfall folded from ``log``'s events (``search`` a tool node)."""
    fold = WaterfallFold(tool_nodes=frozenset({"search"}), **kw)
    for event in log.events:
        fold.add(event)
    return fold


def acquisition_log() -> Log:
    """decide (a 2 s model call), search (1 s), ask_user (waits 10 s for a human), finish."""
    return (Log().add(0, "run_started")
            .add(0, "node_started", "decide", "t1", step=1)
            .call(0.5, 2.5, "decide", "t1", "c1",
                  usage={"input_tokens": 120, "output_tokens": 40, "total_tokens": 160,
                         "cached_tokens": None})
            .add(3, "node_finished", "decide", "t1", step=1, duration_ms=3000)
            .node(3, 4, "search", "t2", 2)
            .add(4, "node_started", "ask_user", "t3", step=3)
            .add(4.2, "interrupt_raised", "ask_user", "t3", step=3,
                 payload={"interrupt_id": "i1"})
            .add(14.2, "interrupt_answered", "ask_user", payload={"interrupt_id": "i1"})
            .add(14.2, "run_resumed")
            .node(14.3, 14.5, "ask_user", "t3", 3)
            .node(14.5, 15, "finish", "t4", 4)
            .add(15, "run_succeeded"))


def stored_run(operator, log: Log, graph: str = "acquisition") -> Run:
    """A finished run of ``operator``'s whose events are ``log``'s, at their times."""
    run = Run.objects.create(graph=graph, thread_id=f"{uuid.uuid4()}:planner",
                             state=Run.State.SUCCEEDED, created_by=operator,
                             started_at=T0, finished_at=T0 + timedelta(seconds=15),
                             last_seq=len(log.events))
    for e in log.events:
        row = RunEvent.objects.create(run=run, **{k: v for k, v in e.items()
                                                  if k != "created_at"})
        RunEvent.objects.filter(pk=row.pk).update(created_at=e["created_at"], at=e["created_at"])
    return run
