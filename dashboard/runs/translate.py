"""Turn LangGraph stream parts into RunEvent field dicts (no I/O; the one change made to
a part is the ids given to its messages, see :func:`name_messages`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.types import StreamMode

from dashboard.models import RunEvent
from dashboard.runs.jsonsafe import to_jsonable
from planner.spec import QuestionDeadline

# "updates" is not asked for: a node's update, and the interrupts it raised, arrive with its
# task's result in "tasks" (asking for both made LangGraph build every update twice)
STREAM_MODES: list[StreamMode] = ["tasks", "checkpoints", "custom"]

Kind = RunEvent.Kind


def deadline_ignored(question: Any) -> str:
    """Why the deadline a question's value carries is ignored ("": it has none, or a good
    one): the question's event says it, so the operator sees why it waits for ever."""
    if not isinstance(question, Mapping) or question.get("deadline") is None:
        return ""
    try:
        QuestionDeadline.from_value(question["deadline"])
    except (TypeError, ValueError, ArithmeticError) as exc:
        return f"{exc}; the question waits without a deadline"
    return ""


def namespace_path(ns: Iterable[str]) -> str:
    """``("worker:abc", "inner:def")`` → ``"worker:abc|inner:def"`` ("" at the root)."""
    return "|".join(ns)


def name_messages(update: Any) -> None:
    """Give each message a node returns without an id the id the state will keep.

    LangGraph's ``add_messages`` gives such a message an id only when it applies the
    step's writes, after the task's result was streamed; the result holds the very objects
    it will apply, so an id set here is the one the state keeps (one set there first is
    the one read here), and every message a client is streamed has its state's id.
    """
    found = update.get("messages") if isinstance(update, Mapping) else None
    for message in found if isinstance(found, list) else [found]:
        if isinstance(message, BaseMessage) and message.id is None:
            message.id = str(uuid.uuid4())
        elif isinstance(message, dict) and "content" in message and not message.get("id"):
            message["id"] = str(uuid.uuid4())


@dataclass
class InterruptSeen:
    """An interrupt the stream raised: its id, where, and the question."""

    interrupt_id: str
    node: str
    namespace: str
    payload: Any


@dataclass
class StreamTranslator:
    """Keeps what a run's stream needs across parts: task start times, the step, …"""

    seen_checkpoints: set[str] = field(default_factory=set)
    started: dict[str, tuple[float, str, str]] = field(default_factory=dict)
    """The tasks in flight: by task id, when they started, their node and namespace."""
    steps: dict[str, int] = field(default_factory=dict)
    last_checkpoint: dict[str, str] = field(default_factory=dict)
    interrupts: list[InterruptSeen] = field(default_factory=list)
    current_node: str = ""
    last_root_node: str = ""  # the root node that finished last
    root_values: Any = None  # the state in the last root checkpoint streamed (the final one)

    def translate(self, ns: tuple[str, ...], mode: str, data: Any) -> list[dict[str, Any]]:
        """Return the event dicts (without seq) that one stream part produces."""
        path = namespace_path(ns)
        if mode == "tasks":
            return self._task(path, data)
        if mode == "checkpoints":
            return self._checkpoint(path, data)
        if mode == "custom":
            return [self._event(Kind.CUSTOM, path, payload={"data": to_jsonable(data)})]
        return []  # no other mode is asked for (see STREAM_MODES)

    def in_flight(self) -> list[dict[str, str]]:
        """The tasks that started and never ended, in the order they started."""
        return [{"node": name, "namespace": path, "task_id": task_id}
                for task_id, (_, name, path) in self.started.items()]

    def _event(self, kind: str, path: str, **fields: Any) -> dict[str, Any]:
        return {
            "kind": kind,
            "namespace": path,
            "step": self.steps.get(path),
            "node": "",
            "task_id": "",
            "checkpoint_id": self.last_checkpoint.get(path, ""),
            "payload": {},
            "duration_ms": None,
            **fields,
        }

    def _task(self, path: str, data: Mapping[str, Any]) -> list[dict[str, Any]]:
        name, task_id = data["name"], data["id"]
        if "input" in data:  # a task started
            self.started[task_id] = (time.perf_counter(), name, path)
            if not path:
                self.current_node = name
            triggers = [str(t) for t in data.get("triggers") or ()]
            return [
                self._event(
                    Kind.NODE_STARTED, path, node=name, task_id=task_id,
                    payload={"triggers": triggers},
                )
            ]
        began = self.started.pop(task_id, None)
        if not path:
            self.last_root_node = name
        duration = (time.perf_counter() - began[0]) * 1000 if began else None
        if data.get("error") is not None:
            error = data["error"]
            if not path:  # the header names the node that failed, not the last one started
                self.current_node = name
            return [
                self._event(
                    Kind.NODE_FAILED, path, node=name, task_id=task_id, duration_ms=duration,
                    payload={"error": f"{type(error).__name__}: {error}"},
                )
            ]
        if data.get("interrupts"):
            return self._interrupts(path, name, task_id, data["interrupts"])
        result = data.get("result")
        name_messages(result)
        return [
            self._event(
                Kind.NODE_FINISHED, path, node=name, task_id=task_id, duration_ms=duration,
                payload={"update": to_jsonable(result)},
            )
        ]

    def _checkpoint(self, path: str, data: Mapping[str, Any]) -> list[dict[str, Any]]:
        conf = data["config"]["configurable"]
        checkpoint_id = conf["checkpoint_id"]
        metadata = data.get("metadata") or {}
        step = metadata.get("step")
        self.steps[path] = (step if isinstance(step, int) else -1) + 1
        self.last_checkpoint[path] = checkpoint_id
        if not path:
            self.root_values = data.get("values")
        if checkpoint_id in self.seen_checkpoints:
            return []  # a resume re-announces the checkpoint it starts from
        self.seen_checkpoints.add(checkpoint_id)
        parent = (data.get("parent_config") or {}).get("configurable", {})
        return [
            self._event(
                Kind.CHECKPOINT, path, step=step, checkpoint_id=checkpoint_id,
                payload={
                    "source": metadata.get("source"),
                    "next": list(data.get("next") or ()),
                    "parent_checkpoint_id": parent.get("checkpoint_id"),
                },
            )
        ]

    def _interrupts(
        self, path: str, node: str, task_id: str, items: Iterable[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        out = []
        known = {i.interrupt_id for i in self.interrupts}
        for item in items:
            if item["id"] in known:
                continue  # a subgraph's interrupt surfaces again in its parent task
            seen = InterruptSeen(item["id"], node, path, to_jsonable(item.get("value")))
            self.interrupts.append(seen)
            payload = {"interrupt_id": item["id"], "value": seen.payload}
            if ignored := deadline_ignored(seen.payload):
                payload["deadline_ignored"] = ignored
            out.append(self._event(Kind.INTERRUPT_RAISED, path, node=node, task_id=task_id,
                                   payload=payload))
        return out
