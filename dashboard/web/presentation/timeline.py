"""The timeline: a run's events grouped by node execution, one rule for page, socket, replay.

A node execution is the events of one LangGraph task (one task id): its start, its model
calls, the question it raised and the answer to it, its end or failure, and the checkpoint
its super-step wrote when it ran alone in that step. Every other event is a row of its
own; the bookkeeping among them (checkpoints between steps, a run started, resumed or
continued, breakpoints changed) is hidden unless asked for. :class:`Timeline` takes events
one at a time, in ``seq`` order, as :class:`dashboard.web.presentation.trace.TraceFold`
does, so the page load, the websocket (which appends new rows and completes running ones
in place) and the replay group the same rows the same way; :func:`timeline_rows` is the
same fold over a whole log.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# event kinds as plain strings (the model's RunEvent.Kind names them; this stays pure)
NODE_STARTED, NODE_FINISHED, NODE_FAILED = "node_started", "node_finished", "node_failed"
INTERRUPT_RAISED, INTERRUPT_ANSWERED = "interrupt_raised", "interrupt_answered"
QUESTION_REMINDED, QUESTION_ESCALATED = "question_reminded", "question_escalated"
CHECKPOINT, MODEL_STARTED = "checkpoint", "model_started"
BOOKKEEPING = frozenset({CHECKPOINT, "run_started", "run_resumed", "run_recovered",
                         "run_continued", "breakpoints_changed"})
"""Kinds of the rows hidden by default: the engine's own steps, not what the graph did."""
NODE = "node"
"""The kind of a row that is one node execution (other rows are named by their event)."""
RUNNING, WAITING, FINISHED, FAILED = "running", "waiting", "finished", "failed"
STOPPED = "cancelled"
"""A node execution the run ended under (cancelled, or failed elsewhere): it never finished."""
STATUS_LABELS = {RUNNING: "running", WAITING: "waiting for you", FINISHED: "done",
                 FAILED: "failed", STOPPED: "stopped"}
RUN_SUCCEEDED = "run_succeeded"
RUN_ENDS = frozenset({RUN_SUCCEEDED, "run_failed", "run_cancelled"})
SHOWN = ("seq", "kind", "node", "namespace", "step", "task_id", "checkpoint_id",
         "duration_ms", "created_at")
"""The fields of an event a row keeps (its line in the timeline shows them)."""
KEPT = ("error", "interrupt_id", "answered_by", "source", "next", "groups", "deadline_at")
"""The small payload keys a row keeps: a node's update, a model call's messages are read
once, for the summary, not held (a watcher's fold lives as long as its socket)."""
ASKS = "asks: "
ROWS_PER_PARTIAL = 20
"""New rows a live page is sent in one partial (it swaps one partial at a time, yielding
between them: static/planwatch/app.js)."""
SUMMARY_CHANNELS = 3
"""How many changed channels a row's summary names before it says “+N more”."""
SUMMARY_VALUE = 48
"""How many characters of a changed value the summary shows."""


@dataclass
class Row:
    """One row of the timeline: a node execution, or one event standing alone."""

    key: str
    """Stable across batches: ``t-<task id>`` for a node execution, ``e-<seq>`` otherwise."""
    kind: str
    """``node``, or the kind of the lone event."""
    node: str
    """The node's name (``parent:child`` in a subgraph); "" for a run's own events."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """Its events as their lines show them (``SHOWN``; of the payload only ``KEPT``)."""
    parts: list[str] = field(default_factory=list)
    """What each event said, for the summary."""
    stopped: bool = False
    """The run ended while this node execution was running or waiting: it never will end."""
    task_failed: bool = False
    """The node returned, and its update marked a task of the graph's task view failed."""
    goal_failed: str = ""
    """A run that returned but whose output says its goal failed: the outcome's label
    (``plan failed``, the graph's ``GraphSpec.failure_label``)."""

    @property
    def first_seq(self) -> int:
        """The seq of the row's first event (rows are ordered by it)."""
        return int(self.events[0]["seq"])

    @property
    def last_seq(self) -> int:
        """The seq of the row's latest event."""
        return int(self.events[-1]["seq"])

    @property
    def title(self) -> str:
        """What the row is called: its node, or its event's kind in words."""
        if self.kind == NODE:
            return self.node
        if self.edited:
            return "State edited"
        if self.goal_failed:
            return f"Run finished \u2014 {self.goal_failed}"
        return self.kind.replace("_", " ").capitalize()

    @property
    def dom_id(self) -> str:
        """The row's HTML id."""
        return f"grp-{self.key}"

    @property
    def edited(self) -> bool:
        """Whether the row is an operator's edit of the state (a checkpoint of theirs)."""
        return self.kind == CHECKPOINT and self.events[0]["payload"].get("source") == "update"

    @property
    def bookkeeping(self) -> bool:
        """Whether the row is hidden unless bookkeeping is asked for (an operator's state
        edit is a checkpoint, but never bookkeeping)."""
        return self.kind in BOOKKEEPING and not self.edited

    @property
    def kinds(self) -> list[str]:
        """The kinds of the row's events, each once, in the order they came."""
        return list(dict.fromkeys(str(e["kind"]) for e in self.events))

    @property
    def status(self) -> str:
        """Where a node execution stands: running, waiting (for an answer), finished, failed;
        "" for a lone event."""
        if self.kind != NODE:
            return FAILED if self.goal_failed else ""
        status = RUNNING
        for event in self.events:
            status = {NODE_STARTED: RUNNING, INTERRUPT_RAISED: WAITING,
                      INTERRUPT_ANSWERED: RUNNING, NODE_FINISHED: FINISHED,
                      NODE_FAILED: FAILED}.get(str(event["kind"]), status)
        if self.stopped and status in (RUNNING, WAITING):
            # a start after its end is a resume replaying a finished task: it was done
            return FINISHED if NODE_FINISHED in self.kinds else STOPPED
        if status == FINISHED and self.task_failed:
            return FAILED  # a worker that returned a failed task failed, visibly
        return status

    @property
    def status_label(self) -> str:
        """The status in words."""
        return STATUS_LABELS.get(self.status, "")

    @property
    def duration_ms(self) -> float | None:
        """How long the node ran (its last start to its end), when it has ended."""
        for event in reversed(self.events):
            if event["kind"] in (NODE_FINISHED, NODE_FAILED):
                value = event.get("duration_ms")
                return float(value) if value is not None else None
        return None

    @property
    def duration(self) -> str:
        """The duration in words: ``812 ms``, ``3.4 s``; "" while it runs."""
        ms = self.duration_ms
        if ms is None:
            return ""
        return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"

    @property
    def checkpoint_id(self) -> str:
        """The checkpoint the row ends on (its step's, or its own), or ""."""
        for event in reversed(self.events):
            if event["kind"] == CHECKPOINT and event.get("checkpoint_id"):
                return str(event["checkpoint_id"])
        return ""

    @property
    def summary(self) -> str:
        """A short line saying what the row did: the channels a node changed, its error, the
        question it asks or the answer it got; for a lone event, what it says."""
        calls = self.kinds_all.count(MODEL_STARTED)
        parts = [*self.parts, f"{calls} model call{'s' if calls > 1 else ''}" if calls else ""]
        return " · ".join(p for p in parts if p)

    @property
    def kinds_all(self) -> list[str]:
        """The kind of each of the row's events."""
        return [str(e["kind"]) for e in self.events]

    def add(self, event: dict[str, Any]) -> None:
        """Take ``event`` in: keep what its line shows, and what it says in the summary."""
        payload = _payload(event)
        self.events.append({**{name: event.get(name) for name in SHOWN},
                            "payload": {k: payload[k] for k in KEPT if k in payload}})
        kind = event["kind"]
        if kind == NODE_FINISHED:
            self.parts.append(changed(payload.get("update")))
        elif kind == NODE_FAILED or (payload.get("error") and self.kind != NODE):
            self.parts.append(str(payload.get("error") or "failed"))
        elif kind == INTERRUPT_RAISED:
            self.parts.append(f"{ASKS}{question(payload.get('value'))}")
        elif kind == INTERRUPT_ANSWERED:
            # the question and its answer as one part, the answer where it is seen
            by = f" by {payload['answered_by']}" if payload.get("answered_by") else ""
            asked = self.parts.pop()[len(ASKS):] if self.parts and self.parts[-1].startswith(
                ASKS) else ""
            self.parts.append(f"answered {short(payload.get('answer'))}{by}"
                              + (f" to “{asked}”" if asked else ""))
        elif kind == QUESTION_REMINDED:
            at = str(payload.get("deadline_at") or "")[11:19]
            self.parts.append("reminded: its deadline draws near" + (f" ({at} UTC)" if at else ""))
        elif kind == QUESTION_ESCALATED:
            groups = ", ".join(map(str, payload.get("groups") or []))
            self.parts.append(f"deadline came: escalated to {groups}")
        elif kind == CHECKPOINT and payload.get("source") == "update":
            values = payload.get("values")
            self.parts.append(f"by {payload.get('by') or 'someone'}: "
                              + (changed(values) if isinstance(values, dict) else "no values")
                              + (f" (as {payload['as_node']})" if payload.get("as_node") else ""))
        elif kind == CHECKPOINT and self.kind == CHECKPOINT:
            nxt = payload.get("next") or []
            self.parts.append(f"{payload.get('source') or 'checkpoint'}"
                              + (f", next: {', '.join(map(str, nxt))}" if nxt else ""))

    def stops(self) -> list[int]:
        """Where replay-by-node stops in this row: after each question it raised, and at
        its end (its checkpoint when it has one)."""
        asked = [int(e["seq"]) for e in self.events if e["kind"] == INTERRUPT_RAISED]
        return [*asked, self.last_seq]


def changed(update: Any) -> str:
    """What a node's update changed, shortly: ``n = 1 · trail = ["step1"]``."""
    if not isinstance(update, dict) or not update:
        return "no change"
    names = list(update)
    shown = [f"{name} = {short(update[name])}" for name in names[:SUMMARY_CHANNELS]]
    more = len(names) - SUMMARY_CHANNELS
    return " · ".join(shown) + (f" · +{more} more" if more > 0 else "")


def short(value: Any) -> str:
    """A value as compact JSON, cut to ``SUMMARY_VALUE`` characters."""
    text = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
    return text if len(text) <= SUMMARY_VALUE else text[:SUMMARY_VALUE - 1] + "…"


def question(value: Any) -> str:
    """What an interrupt asks, in the words its value gives (prompt, label or field)."""
    if isinstance(value, dict):
        for name in ("prompt", "label", "question", "field"):
            if value.get(name):
                return str(value[name])
    if value is None:
        return ""
    if isinstance(value, list) and value:
        return question(value[0]) + (f" (+{len(value) - 1} more)" if len(value) > 1 else "")
    return short(value)


def _payload(event: dict[str, Any]) -> dict[str, Any]:
    payload = event.get("payload")
    return payload if isinstance(payload, dict) else {}


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)


@dataclass
class Timeline:
    """Rows folded from events in ``seq`` order; :meth:`add` says which row an event joined."""

    rows: dict[str, Row] = field(default_factory=dict)
    """By key, in the order they began."""
    task_channel: str = ""
    """The graph's task channel (``TaskView.channel``), "" if it has none."""
    task_failed: tuple[str, ...] = ()
    """The statuses of a failed task there (``TaskView.failed``)."""
    goal_failure: Callable[[Any], str | None] | None = None
    """How a returned run's output says its goal failed (``GraphSpec.goal_failure``)."""
    failure_label: str = "failed"
    """What such an outcome is called (``GraphSpec.failure_label``)."""
    row_of: dict[int, str] = field(default_factory=dict)
    """Each seq's row key."""
    _step_rows: dict[tuple[str, int], dict[str, None]] = field(default_factory=dict)
    _asked_by: dict[str, str] = field(default_factory=dict)
    _ended: dict[int, list[str]] = field(default_factory=dict)
    """The rows a run's final event stopped, by its seq (redrawn in place with it)."""

    def add(self, event: dict[str, Any]) -> Row:
        """Put ``event`` in its row (a new row, or the node execution it belongs to)."""
        key = self._key(event)
        row = self.rows.get(key)
        if row is None:
            node, ns = str(event.get("node") or ""), str(event.get("namespace") or "")
            row = self.rows[key] = Row(
                key=key, kind=NODE if key.startswith("t-") else str(event["kind"]),
                node=f"{ns.split(':', 1)[0]}:{node}" if ns and node else node)
        row.add(event)
        if event["kind"] == RUN_SUCCEEDED and self.goal_failure is not None:
            reason = self.goal_failure(_payload(event).get("output"))
            if reason is not None:
                row.goal_failed = self.failure_label
                row.parts.append(reason or self.failure_label)
        if self.task_channel and event["kind"] == NODE_FINISHED:
            update = _payload(event).get("update")
            patch = update.get(self.task_channel) if isinstance(update, dict) else None
            if isinstance(patch, dict) and any(
                    isinstance(task, dict) and task.get("status") in self.task_failed
                    for task in patch.values()):
                row.task_failed = True
        self.row_of[int(event["seq"])] = key
        if row.kind == NODE and event.get("step") is not None:
            self._step_rows.setdefault((str(event.get("namespace") or ""), int(event["step"])),
                                       {})[key] = None
        if event["kind"] == INTERRUPT_RAISED and isinstance(event.get("payload"), dict):
            self._asked_by[str(event["payload"].get("interrupt_id"))] = key
        if event["kind"] in RUN_ENDS:
            open_rows = [r for r in self.rows.values() if r.status in (RUNNING, WAITING)]
            for open_row in open_rows:
                open_row.stopped = True
            self._ended[int(event["seq"])] = [r.key for r in open_rows]
        return row

    def _key(self, event: dict[str, Any]) -> str:
        kind, payload = event["kind"], event.get("payload")
        if event.get("task_id") and kind != CHECKPOINT:
            return f"t-{_safe(str(event['task_id']))}"
        if kind == INTERRUPT_ANSWERED and isinstance(payload, dict):
            asked = self._asked_by.get(str(payload.get("interrupt_id")))
            if asked:
                return asked
        if kind == CHECKPOINT and event.get("step") is not None \
                and isinstance(payload, dict) and payload.get("source") == "loop":
            # a step's checkpoint belongs to the node execution when it ran alone
            ran = self._step_rows.get((str(event.get("namespace") or ""), int(event["step"])))
            if ran and len(ran) == 1:
                return next(iter(ran))
        return f"e-{event['seq']}"

    def touched(self, first: int, last: int) -> list[tuple[Row, list[dict[str, Any]], bool]]:
        """The rows events ``first``..``last`` went to, each with those events and whether
        the row began among them (a new row) or earlier (a row to complete in place)."""
        keys = dict.fromkeys(self.row_of[s] for s in range(first, last + 1) if s in self.row_of)
        for seq in range(first, last + 1):  # rows a final event stopped: redrawn in place
            keys.update(dict.fromkeys(self._ended.get(seq, ())))
        out = []
        for key in keys:
            row = self.rows[key]
            events = [e for e in row.events if first <= int(e["seq"]) <= last]
            out.append((row, events, row.first_seq >= first))
        return out


def timeline_rows(events: Iterable[dict[str, Any]]) -> list[Row]:
    """A whole log (``event_dict`` form, in seq order) grouped into rows."""
    timeline = Timeline()
    for event in events:
        timeline.add(event)
    return list(timeline.rows.values())


def rows_filter(rows: Sequence[Row], *, node: str = "", kind: str = "") -> list[Row]:
    """The rows of node ``node`` and with an event of kind ``kind`` ("" matches all)."""
    return [r for r in rows if (not node or r.node == node) and (not kind or kind in r.kinds)]


def row_nodes(rows: Sequence[Row]) -> list[str]:
    """The nodes that ran, each once, in the order they first ran."""
    return list(dict.fromkeys(r.node for r in rows if r.kind == NODE and r.node))


def replay_stops(rows: Sequence[Row]) -> list[int]:
    """The seqs replay-by-node steps to: each visible row's stops, in order."""
    return sorted({s for r in rows if not r.bookkeeping for s in r.stops()})


def answers_upto(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The answers given in ``events``, each with the question it answered."""
    asked: dict[str, Any] = {}
    answers = []
    for event in events:
        payload = _payload(event)
        if event["kind"] == INTERRUPT_RAISED:
            asked[str(payload.get("interrupt_id"))] = payload.get("value")
        elif event["kind"] == INTERRUPT_ANSWERED:
            answer = payload.get("answer")
            answers.append({
                "seq": event["seq"], "node": event.get("node") or "",
                "question": question(asked.get(str(payload.get("interrupt_id")))),
                "answer": answer if isinstance(answer, str)
                else json.dumps(answer, ensure_ascii=False, default=str),
                "by": payload.get("answered_by") or ""})
    return answers
