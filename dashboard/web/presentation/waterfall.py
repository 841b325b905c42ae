"""The waterfall of a run: where its time went, folded from its event log.

One bar per node execution, decomposition task, model call (nested under the node it ran
in) and wait for a human, on one time axis, coloured by kind: ``model``, ``tool`` (the
nodes the graph's ``GraphSpec.tool_nodes`` names), ``human`` and ``engine`` (every other
node); tasks get a colour of their own. :class:`WaterfallFold` takes events one at a time,
as :class:`dashboard.web.presentation.trace.TraceFold` does, so the page load, the
websocket and the replay draw the same bars from the same rows; :func:`waterfall_view`
lays them out for the template, and :func:`rows_html` writes the rows in Python (a
215-task plan has hundreds of rows, re-rendered with every batch: a template include per
row would cost ten times more).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import batched
from typing import Any
from urllib.parse import quote

from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from dashboard.runs.figures import FiguresFold, length, minus, moment, union
from planner.spec import TaskView

# the kinds of the model-call events (plain strings: the model's Kind names them elsewhere)
MODEL_STARTED, MODEL_FINISHED = "model_started", "model_finished"
MODEL_KINDS = (MODEL_STARTED, MODEL_FINISHED)
# where a wait for a human begins and ends (a question, or a breakpoint's pause)
_WAIT_STARTS = ("interrupt_raised", "run_paused")
_WAIT_ENDS = ("interrupt_answered", "run_resumed", "run_continued")
_FINISH = ("run_succeeded", "run_failed", "run_cancelled")
GROUP_AT = 2
"""Parallel executions of one node in one step (a fan-out) from this many are grouped."""
OPEN_UP_TO = 6
"""A group of more rows than this starts folded."""


@dataclass
class Span:
    """One bar: what ran (or waited), from when to when, in seconds since the run began."""

    key: str
    kind: str
    """``model``, ``tool``, ``engine``, ``human`` or ``task``."""
    label: str
    start: float
    end: float | None = None
    """None while it runs (drawn up to now)."""
    seq: int = 0
    """The event whose detail the bar opens (its timeline row)."""
    note: str = ""
    status: str = ""
    node: str = ""
    namespace: str = ""
    step: int | None = None
    task: str = ""
    """A task bar's task id (it opens the task's detail instead of an event's)."""
    children: list[Span] = field(default_factory=list)

    def stop(self, end: float, *, duration_ms: float | None = None) -> None:
        """End the bar at ``end``; a measured duration moves its start back if it was
        written late (events are stamped when written, a batch at a time)."""
        self.end = max(end, self.start)
        if duration_ms is not None and duration_ms >= 0:
            self.start = min(self.start, self.end - duration_ms / 1000)


def call_label(payload: Mapping[str, Any]) -> str:
    """How a model call is named: its model, else its purpose, else ``model``."""
    return str(payload.get("model") or payload.get("purpose") or "model")


@dataclass
class WaterfallFold:
    """Bars folded from a run's events, one event at a time and in seq order."""

    tool_nodes: frozenset[str] = frozenset()
    task_view: TaskView | None = None
    origin: datetime | None = None
    last: float = 0.0
    """Seconds from the first event to the last one folded."""
    finished: bool = False
    items: list[Span] = field(default_factory=list)
    """Top-level bars in start order: node executions and waits for a human."""
    calls: dict[str, Span] = field(default_factory=dict)
    task_start: dict[str, float] = field(default_factory=dict)
    task_end: dict[str, float] = field(default_factory=dict)
    task_stopped: set[str] = field(default_factory=set)
    """Tasks in flight when the run ended: their bars end there, as stopped."""
    _nodes: dict[tuple[str, str], Span] = field(default_factory=dict)
    _waits: dict[str, Span] = field(default_factory=dict)
    _resumed: float | None = None
    """When the run resumed while questions' waits were open (their answers follow)."""
    figures: FiguresFold = field(default_factory=FiguresFold)
    """The run's figures (working, waiting, model time, cost), folded from the same events."""

    def moment(self, seconds: float) -> datetime:
        """Second ``seconds`` of the run as a moment."""
        return (self.origin or datetime.now(UTC)) + timedelta(seconds=seconds)

    def add(self, event: Mapping[str, Any]) -> None:
        """Fold one event (``event_dict`` form)."""
        at = moment(event)
        if at is None:
            return
        self.figures.add(event)
        if self.origin is None:
            self.origin = at
        t = max((at - self.origin).total_seconds(), 0.0)
        self.last = max(self.last, t)
        kind, seq = str(event["kind"]), int(event["seq"])
        node, ns = str(event.get("node") or ""), str(event.get("namespace") or "")
        key = (ns, str(event.get("task_id") or ""))
        raw = event.get("payload")
        payload: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
        if kind == "node_started":
            span = Span(key=f"n{seq}", label=node, start=t, seq=seq, node=node, namespace=ns,
                        step=event.get("step"),
                        kind="tool" if node in self.tool_nodes else "engine")
            self._nodes[key] = span
            self.items.append(span)
        elif kind in ("node_finished", "node_failed", "interrupt_raised") and key in self._nodes:
            span = self._nodes[key]
            if span.end is None:
                span.stop(t, duration_ms=event.get("duration_ms"))
                span.seq = seq
                span.status = {"node_failed": "failed",
                               "interrupt_raised": "asked"}.get(kind, "")
        if kind == "node_finished" and self._tasks(payload.get("update"), t) \
                and key in self._nodes:
            self._nodes[key].status = "failed"  # it returned a failed task: red, visibly
        if kind == MODEL_STARTED:
            self._call_started(payload, key, t, seq)
        elif kind == MODEL_FINISHED:
            self._call_finished(payload, key, t, seq, event.get("duration_ms"))
        if self._resumed is not None and kind != "interrupt_answered":
            # a resume whose questions got no answer event (withdrawn): they ended with it
            for wait_id in list(self._waits):
                self._waits.pop(wait_id).stop(self._resumed)
            self._resumed = None
        if kind in _WAIT_STARTS:
            wait_id = str(payload.get("interrupt_id") or f"pause-{seq}")
            what = "question" if kind == "interrupt_raised" else "paused"
            span = Span(key=f"w{seq}", kind="human", label=f"human wait ({what})",
                        start=t, seq=seq, node=node, namespace=ns)
            self._waits[wait_id] = span
            self.items.append(span)
        elif kind == "interrupt_answered":
            # a question's wait ends when it was answered (its event is written when the
            # run resumes, with the moment of the answer)
            answered = str(payload.get("interrupt_id") or "")
            for wait_id in [answered] if answered in self._waits else []:
                self._waits.pop(wait_id).stop(t)
        elif kind in _WAIT_ENDS:
            # a pause ends when the run goes on; its questions end with their answers,
            # which follow the resume in the log
            for wait_id in [w for w in self._waits if w.startswith("pause-")]:
                self._waits.pop(wait_id).stop(t)
            if self._waits:
                self._resumed = t
        elif kind in _FINISH:
            self.finished = True
            for span in self._waits.values():
                span.stop(t)
            self._waits.clear()
            # node executions and model calls the run ended under never will end: drawn to
            # the end of the run, as stopped, not "running…" for ever
            for span in [*self._nodes.values(), *self.calls.values()]:
                if span.end is None:
                    span.stop(t)
                    span.status = "stopped"
            for tid in self.task_start:
                if tid not in self.task_end:
                    self.task_end[tid] = t
                    self.task_stopped.add(tid)

    def _call_started(self, payload: Mapping[str, Any], key: tuple[str, str], t: float,
                      seq: int) -> None:
        call_id = str(payload.get("call_id") or f"c{seq}")
        span = Span(key=f"m{seq}", kind="model", label=call_label(payload), start=t, seq=seq,
                    note=str(payload.get("purpose") or ""))
        self.calls[call_id] = span
        parent = self._nodes.get(key)
        if parent is not None:
            parent.children.append(span)
        else:  # a call outside any node the log knows: a row of its own
            self.items.append(span)

    def _call_finished(self, payload: Mapping[str, Any], key: tuple[str, str], t: float,
                       seq: int, duration_ms: Any) -> None:
        call_id = str(payload.get("call_id") or "")
        span = self.calls.get(call_id)
        if span is None:  # its start is missing: drawn from its latency alone
            self._call_started(payload, key, t, seq)
            span = self.calls[call_id or f"c{seq}"]
        latency = duration_ms if duration_ms is not None else payload.get("latency_ms")
        span.stop(t, duration_ms=latency if isinstance(latency, (int, float)) else None)
        span.seq = seq
        span.status = "failed" if payload.get("error") else ""
        span.note = tokens_text(payload.get("usage"))

    def _tasks(self, update: Any, t: float) -> bool:
        """Fold a node's update of the task channel; whether it marked a task failed."""
        view = self.task_view
        if view is None or not isinstance(update, dict):
            return False
        patch = update.get(view.channel)
        if not isinstance(patch, dict):
            return False
        failed = False
        for tid, change in patch.items():
            status = change.get("status") if isinstance(change, dict) else None
            if not status:
                continue
            tid = str(tid)
            failed = failed or status in view.failed
            if status == view.running:
                self.task_start.setdefault(tid, t)
                self.task_end.pop(tid, None)  # a retry runs on in the same bar
            elif status not in view.not_started:
                self.task_start.setdefault(tid, t)
                self.task_end[tid] = t
        return failed


def tokens_text(usage: Any) -> str:
    """Token usage as reported (``120 in · 40 out``), or ``tokens not reported``."""
    if not isinstance(usage, dict):
        return "tokens not reported"
    parts = [f"{usage[k]:,} {word}" for k, word in
             (("input_tokens", "in"), ("output_tokens", "out"), ("cached_tokens", "cached"))
             if isinstance(usage.get(k), int)]
    if not parts and isinstance(usage.get("total_tokens"), int):
        parts = [f"{usage['total_tokens']:,} tokens"]
    return " · ".join(parts) if parts else "tokens not reported"


def seconds_text(value: float) -> str:
    """A duration for people: ``< 1 ms``, ``4 ms``, ``0.42 s``, ``12.3 s``, ``2 min 05 s``
    (a sub-millisecond node is not "0 ms")."""
    if 0 < value < 0.0005:
        return "< 1 ms"
    if value < 0.1:
        return f"{value * 1000:.0f} ms"
    if value < 1:
        return f"{value:.2f} s"
    if value < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes} min {rest:02d} s"


@dataclass(frozen=True)
class Share:
    """One part of the summary: a name, its kind (for the colour), seconds and share."""

    name: str
    kind: str
    seconds: float
    percent: float

    @property
    def text(self) -> str:
        """The seconds for people."""
        return seconds_text(self.seconds)


@dataclass(frozen=True)
class Summary:
    """Where the time went: working time split in model, tools and the rest; human wait apart."""

    total: float
    working: float
    human: float
    parts: tuple[Share, ...]
    model_calls: int
    human_since: str = ""
    """While a wait for people is open: the ISO moment from which the page ticks it."""
    total_since: str = ""
    """While the run has not ended: its first moment, from which the page ticks its length."""

    @property
    def total_text(self) -> str:
        """The run's length for people."""
        return seconds_text(self.total)

    @property
    def working_text(self) -> str:
        """Working time for people."""
        return seconds_text(self.working)

    @property
    def human_text(self) -> str:
        """Human wait for people."""
        return seconds_text(self.human)


def human_waits(fold: WaterfallFold, *, now: float) -> list[tuple[float, float]]:
    """The waits for a human up to ``now`` seconds, merged (overlapping waits count once)."""
    return union((s.start, s.end if s.end is not None else now)
                  for s in fold.items if s.kind == "human")


def _all_spans(fold: WaterfallFold) -> Iterable[Span]:
    for item in fold.items:
        yield item
        yield from item.children


def summary(fold: WaterfallFold, *, now: float) -> Summary:
    """Where the time went up to ``now`` seconds: the run's figures (working time, waits
    for people, model time: :mod:`dashboard.runs.figures`, the same the header, the API
    and the export show), working time split further into tools and the rest."""
    figures = fold.figures.at(fold.moment(now))
    tool_spans = [(span.start, span.end if span.end is not None else now)
                  for span in _all_spans(fold) if span.kind == "tool"]
    model_spans = [(span.start, span.end if span.end is not None else now)
                   for span in _all_spans(fold) if span.kind == "model"]
    tools = minus(minus(union(tool_spans), human_waits(fold, now=now)), union(model_spans))
    working = figures.working
    model = min(figures.model, working)
    tool = min(length(tools), working - model)
    rest = max(working - model - tool, 0.0)

    def share(name: str, kind: str, value: float) -> Share:
        return Share(name, kind, value, 100 * value / working if working > 0 else 0.0)

    since = (fold.moment(now) - timedelta(seconds=figures.waiting)).isoformat() \
        if figures.open_wait else ""
    return Summary(total=figures.elapsed, working=working, human=figures.waiting, parts=(
        share("model", "model", model), share("tools", "tool", tool),
        share("the rest (engine, other nodes)", "engine", rest),
    ), model_calls=figures.model_calls, human_since=since,
        total_since=fold.moment(0).isoformat() if since and fold.origin else "")


@dataclass(frozen=True)
class Row:
    """One line of the waterfall: a bar, or a folded group of bars under a summary bar."""

    span: Span
    depth: int = 0
    rows: tuple[Row, ...] = ()
    group: str = ""
    """A group's key (its rows are folded under its summary bar); "" for a bar."""
    open: bool = True


def _group_nodes(items: list[Span]) -> list[Row]:
    """Bars in start order; parallel runs of one node in one step folded into a group."""
    out: list[Row] = []
    i = 0
    while i < len(items):
        span = items[i]
        j = i + 1
        if span.kind != "human":
            while (j < len(items) and items[j].kind != "human"
                   and (items[j].node, items[j].namespace, items[j].step)
                   == (span.node, span.namespace, span.step)):
                j += 1
        members = items[i:j]
        if len(members) >= GROUP_AT:
            ends = [m.end for m in members]
            calls = _alike(c for m in members for c in m.children)
            group = Span(key=f"g{span.key}", kind=span.kind,
                         label=f"{span.label} \u00d7{len(members)}", start=span.start,
                         end=None if None in ends else max(e for e in ends if e is not None),
                         seq=span.seq, note=" · ".join(
                             ([f"step {span.step}"] if span.step is not None else [])
                             + ([calls] if calls else [])))
            out.append(Row(group, rows=tuple(_node_row(m, 1) for m in members),
                           group=group.key, open=len(members) <= OPEN_UP_TO))
        else:
            out.append(_node_row(span, 0))
        i = j
    return out


def _alike(calls: Iterable[Span]) -> str:
    """Identical model calls said once: ``scripted x98`` ("" when there are none)."""
    counts: dict[str, int] = {}
    for call in calls:
        counts[call.label] = counts.get(call.label, 0) + 1
    return ", ".join(f"{label} \u00d7{n}" if n > 1 else label for label, n in counts.items())


def _node_row(span: Span, depth: int) -> Row:
    """A node's bar with its model calls under it; many identical calls (a node that called
    its model 200 times alike) folded into one group, ``scripted x200``."""
    nested = depth + (1 if span.namespace else 0)
    kids = [Row(c, depth=nested + 1) for c in span.children]
    if len(kids) > OPEN_UP_TO and len({(c.label, c.note) for c in span.children}) == 1:
        first = span.children[0]
        ends = [c.end for c in span.children]
        group = Span(key=f"f{span.key}", kind="model",
                     label=f"{first.label} \u00d7{len(kids)}", start=first.start,
                     end=None if None in ends else max(e for e in ends if e is not None),
                     seq=first.seq, note=first.note)
        kids = [Row(group, depth=nested + 1, group=group.key, open=False,
                    rows=tuple(Row(c, depth=nested + 2) for c in span.children))]
    return Row(span, depth=nested, rows=tuple(kids))


def _task_rows(fold: WaterfallFold, tasks: Mapping[str, Mapping[str, Any]],
               shown: Callable[[str], str] = str) -> list[Row]:
    """Tasks as bars from running to done, one folded group per plan; each task's status
    as ``shown`` makes it true (``TraceFold.shown_status``: cancelled once its run stopped)."""
    plans: dict[str, list[Row]] = {}
    for tid, task in tasks.items():
        parent = task.get("parent")
        if parent is None:
            continue  # the root is the run's goal, not a task of a plan
        start = fold.task_start.get(tid)
        status = shown(str(task.get("status") or ""))
        bar = "stopped" if tid in fold.task_stopped else status
        span = Span(key=f"t{tid}", kind="task", label=f"{tid} {task.get('goal') or ''}",
                    start=start if start is not None else -1.0, end=fold.task_end.get(tid),
                    task=tid, status=bar, note=status)
        plans.setdefault(str(parent), []).append(Row(span, depth=1))
    out = []
    folded = sum(len(r) for r in plans.values()) > 4 * OPEN_UP_TO
    for parent, rows in plans.items():
        ran = [r.span for r in rows if r.span.start >= 0]
        ends = [s.end for s in ran]
        goal = str((tasks.get(parent) or {}).get("goal") or "")
        group = Span(key=f"p{parent}", kind="task", label=f"plan of {parent} {goal}".strip(),
                     start=min((s.start for s in ran), default=-1.0),
                     end=None if None in ends else max((e for e in ends if e is not None),
                                                       default=None),
                     note=f"{len(rows)} tasks", task=parent)
        out.append(Row(group, rows=tuple(rows), group=group.key,
                       open=not folded and len(rows) <= OPEN_UP_TO))
    return out


@dataclass(frozen=True)
class Part:
    """One row as a live page keeps it: where it sits, its own line and its whole block."""

    container: str
    line: str
    """The row's own element (``id="wf-<key>"``), compared between batches."""
    block: str
    """The row with what is under it, inserted when the row is new."""


@dataclass(frozen=True)
class Drawn:
    """What a page shows of the waterfall, to send a live page only what changed."""

    axis: tuple[Any, ...]
    """The shortened waits the bars' places were drawn with (another length of the axis
    moves no bar: the page scales them)."""
    parts: dict[str, Part]
    """By row id, in the page's order."""

    def children(self) -> dict[str, list[str]]:
        """Each container's row ids, in order."""
        out: dict[str, list[str]] = {}
        for key, part in self.parts.items():
            out.setdefault(part.container, []).append(key)
        return out


LABEL_ENDS_PAST = 70.0
"""A break that begins past this percent of the axis has its label end where it ends."""


@dataclass(frozen=True)
class WaterfallView:
    """What ``_waterfall.html`` draws: the summary, the axis and the rows' HTML."""

    summary: Summary
    ticks: tuple[tuple[float, str], ...]
    """Where the axis is labelled (percent, time), each label once, none inside a break."""
    breaks: tuple[tuple[float, float, str], ...]
    """Each shortened wait as drawn: where it begins, how wide (percent), the time left out."""
    rows: SafeString
    task_rows: SafeString
    bars: int
    shortened: bool = False
    """Whether waits for a human are drawn shortened on the axis."""
    scale: float = 1.0
    """The axis's length in drawn seconds: bars are placed in drawn seconds, as shares of it."""
    drawn: Drawn | None = None
    """The rows as parts (a live page is sent the parts that changed)."""

    @property
    def break_labels(self) -> tuple[tuple[float, bool, str], ...]:
        """Each break's label, on a line of the axis below its ticks (the two never meet):
        where it stands (percent), whether it ends there (a break in the axis's last
        :data:`LABEL_ENDS_PAST` percent is labelled leftwards, within the axis) and the time
        left out (``9.5 s``)."""
        return tuple(
            (round(left + width, 3), True, text.removesuffix(" left out"))
            if left > LABEL_ENDS_PAST else (left, False, text.removesuffix(" left out"))
            for left, width, text in self.breaks)

    def delta(self, before: Drawn | None) -> SafeString | None:
        """The OOB swaps that turn a page showing ``before`` into this view: changed rows
        replaced, new rows appended where they belong; None when a wait was shortened
        anew or rows were regrouped (then the whole waterfall is sent)."""
        now = self.drawn
        if before is None or now is None or before.axis != now.axis:
            return None
        old, new = before.children(), now.children()
        for container, ids in old.items():
            if new.get(container, [])[:len(ids)] != ids:
                return None
        out: list[str] = []
        on_page = {ROWS, TASKS} | {f"{key}-c" for key in before.parts}
        for container, ids in new.items():
            if container not in on_page:
                continue  # inside a new row's block, sent with it
            added = ids[len(old.get(container, [])):]
            for batch in batched(added, ROWS_PER_PARTIAL):  # a slice of the page's time each
                out.append(f'<div hx-swap-oob="beforeend:#{container}">'
                           + "".join(now.parts[i].block for i in batch) + "</div>")
        for key, part in now.parts.items():
            was = before.parts.get(key)
            if was is not None and was.line != part.line:
                out.append(part.line.replace(' id="', ' hx-swap-oob="true" id="', 1))
        return mark_safe("".join(out))


ROWS_PER_PARTIAL = 40
"""New rows a live page is sent in one partial (it swaps one partial at a time, yielding
between them: static/planwatch/app.js)."""
ROWS, TASKS = "wf-rows", "wf-tasks"
"""The containers of the waterfall's rows: node executions and waits; tasks by plan."""
LADDER = (1.0, 2.0, 5.0)


def horizon(seconds: float) -> float:
    """Where a live run's axis ends: the next of 1, 2, 5 times a power of ten past
    ``seconds`` (and a quarter), so the bars keep their places between batches (the axis
    moves only when the run outgrows it: the page then scales every bar by the new
    length, and the rows that did not change are not sent again)."""
    target = max(seconds * 1.25, 0.01)
    power = 10.0 ** math.floor(math.log10(target))
    return next((step * power for step in LADDER if step * power >= target), 10 * power)


def waterfall_view(fold: WaterfallFold, *, run_id: Any, now: float | None = None,
                   tasks: Mapping[str, Mapping[str, Any]] | None = None,
                   shown: Callable[[str], str] = str) -> WaterfallView:
    """The waterfall laid out up to ``now`` (seconds since the run began; default: the last
    event, or later for an active run) with bars linking into the run's trace; a run not
    ended yet on an axis to its :func:`horizon`."""
    end = max(fold.last, now if now is not None and not fold.finished else 0.0)
    axis = Axis.of(fold, end=end if fold.finished else horizon(end), now=end)
    ticks = axis.ticks()
    urls = _Urls(run_id, fold.origin)
    rows = _group_nodes(fold.items)
    task_rows = _task_rows(fold, tasks, shown) if tasks and fold.task_view is not None else []
    bars = sum(1 for _ in _all_spans(fold)) + len(fold.task_start)
    parts: dict[str, Part] = {}
    html = _parts(rows, ROWS, axis=axis, now=end, urls=urls, into=parts)
    task_html = _parts(task_rows, TASKS, axis=axis, now=end, urls=urls, into=parts)
    return WaterfallView(
        summary=summary(fold, now=end), ticks=ticks,
        breaks=tuple((round(axis.percent(a), 3), round(axis.percent(b) - axis.percent(a), 3),
                      f"{seconds_text(b - a - w)} left out") for a, b, w in axis.breaks),
        rows=html, task_rows=task_html, bars=bars, shortened=bool(axis.breaks),
        scale=round(axis.shown, 4),
        drawn=Drawn(axis=axis.breaks, parts=parts))


TICK_STEPS = (1.0, 2.0, 2.5, 5.0)
TICK_GAP = 25.0
"""The least room (percent of the axis) between a tick and the end's label, which ends at
the axis's end: a label is up to 40 px wide ("1 min 40 s" more), a phone's axis about
330 px, and the two labels share the room."""


def tick_step(shown: float, count: int = 4) -> float:
    """The round step (1, 2, 2.5 or 5 times a power of ten) that divides ``shown`` seconds
    into at most ``count`` steps."""
    target = max(shown / count, 1e-6)
    power = 10.0 ** math.floor(math.log10(target))
    return next((m * power for m in TICK_STEPS if m * power >= target * (1 - 1e-9)),
                10 * power)


BREAK_SHARE = 0.06
"""A wait for a human is drawn this share of the working time long (if it was longer)."""


def shortened(seconds: float, drawn: float) -> float:
    """How long a wait of ``seconds`` is drawn when waits are shortened to about ``drawn``:
    longer waits stay longer (half a ``drawn`` more for each tenfold), never past their
    own length, so 1 min 14 s and 19.4 s do not look alike."""
    if seconds <= drawn or drawn <= 0:
        return seconds
    return min(drawn * (1 + 0.5 * math.log10(seconds / drawn)), seconds)


@dataclass(frozen=True)
class Axis:
    """Time as drawn: working time to scale, each wait for a human shortened to a break, so
    a run that waited an hour for its operator still shows its seconds of work."""

    end: float
    breaks: tuple[tuple[float, float, float], ...]
    """Each shortened wait: its start, its end, and the length it is drawn with."""
    shown: float

    @classmethod
    def of(cls, fold: WaterfallFold, *, end: float, now: float | None = None) -> Axis:
        """The axis of ``fold`` up to ``end`` seconds (its open waits reach to ``now``)."""
        waits = human_waits(fold, now=end if now is None else min(now, end))
        working = end - length(waits)
        drawn = max(working * BREAK_SHARE, end * 0.001)
        breaks = tuple((a, b, shortened(b - a, drawn)) for a, b in waits if b - a > drawn)
        shown = end - sum(b - a - w for a, b, w in breaks)
        return cls(end=end, breaks=breaks, shown=shown if shown > 0 else 1.0)

    def drawn(self, t: float) -> float:
        """Where second ``t`` is drawn, in shown seconds."""
        cut = 0.0
        for a, b, w in self.breaks:
            if t <= a:
                break
            if t >= b:
                cut += b - a - w
            else:
                cut += (t - a) * (1 - w / (b - a))
        return t - cut

    def percent(self, t: float) -> float:
        """Where second ``t`` is drawn, as a percentage of the axis."""
        return min(max(100 * self.drawn(t) / self.shown, 0.0), 100.0)

    def ticks(self, count: int = 4) -> tuple[tuple[float, str], ...]:
        """Labels every :func:`tick_step` drawn seconds (at most ``count`` steps, evenly
        spaced, round times where no wait is shortened) and at the axis's end: a place
        inside a shortened wait is left to that wait's break mark, one too near the end's
        label (:data:`TICK_GAP`) is left out, and a label equal to the one before is not
        repeated."""
        step = tick_step(self.shown, count)
        places = [k * step for k in range(int(self.shown / step + 1e-9) + 1)
                  if 100 * (self.shown - k * step) / self.shown >= TICK_GAP]
        out: list[tuple[float, str]] = []
        for place in [*places, self.shown]:
            t = self.real(place / self.shown)
            if any(a < t < b for a, b, _ in self.breaks):
                continue
            text = seconds_text(t)
            if out and out[-1][1] == text:
                continue
            out.append((round(100 * place / self.shown, 3), text))
        return tuple(out)

    def real(self, fraction: float) -> float:
        """The second drawn at ``fraction`` of the axis (for its ticks)."""
        target, cut = fraction * self.shown, 0.0
        for a, b, w in self.breaks:
            if target <= a - cut:
                break
            if target < a - cut + w:
                return a + (target - (a - cut)) * (b - a) / w
            cut += b - a - w
        return target + cut


class _Urls:
    """The detail links of bars, reversed once per render (not once per bar), and the
    moment the run's second 0 was (a running bar's duration ticks on the page from it)."""

    def __init__(self, run_id: Any, origin: datetime | None = None) -> None:
        self.origin = origin
        self.event = reverse("dashboard:run_event", args=(run_id, 0))[:-2]
        self.task = reverse("dashboard:run_task", args=(run_id, "x"))[:-2]

    def of(self, span: Span) -> str:
        """Where the bar's detail is read from: its task, or its event."""
        if span.task:
            return f"{self.task}{quote(span.task, safe='')}/"
        return f"{self.event}{span.seq}/"


def rows_html(rows: Iterable[Row], *, axis: Axis, now: float, urls: _Urls) -> SafeString:
    """The rows as HTML: every text escaped, positions in drawn seconds of the axis."""
    return _parts(rows, ROWS, axis=axis, now=now, urls=urls, into={})


def _parts(rows: Iterable[Row], container: str, *, axis: Axis, now: float, urls: _Urls,
           into: dict[str, Part]) -> SafeString:
    """The rows' HTML; each row is noted in ``into`` as a :class:`Part` of ``container``."""
    return mark_safe("".join(_block(r, container, axis=axis, now=now, urls=urls, into=into)
                             for r in rows))


def _block(row: Row, container: str, *, axis: Axis, now: float, urls: _Urls,
           into: dict[str, Part]) -> str:
    """A row with what is under it: a group folds its rows in a ``<details>``; a node's bar
    keeps its model calls in a box of their own (live, a new call is added to it)."""
    span = row.span
    key = f"wf-{span.key}"
    into[key] = Part(container, "", "")  # in the page's order: the row before its rows
    line = _line(row, axis=axis, now=now, urls=urls)
    kids = _parts(row.rows, f"{key}-c", axis=axis, now=now, urls=urls, into=into)
    if row.group:
        block = format_html(
            '<details class="wf-group" id="{}-b"{}>{}<div class="wf-kids" id="{}-c">{}</div>'
            '</details>', key, " open" if row.open else "", line, key, kids)
    elif span.kind in ("engine", "tool"):
        block = format_html('<div class="wf-item" id="{}-b">{}<div class="wf-kids" id="{}-c">'
                            '{}</div></div>', key, line, key, kids)
    else:
        block = mark_safe(line + kids)  # both built by format_html
    into[key] = Part(container, line, block)
    return block


def _line(row: Row, *, axis: Axis, now: float, urls: _Urls) -> str:
    """The row's own element: its label, its duration and its bar."""
    span = row.span
    running = span.end is None and span.start >= 0
    if span.start < 0:  # a task that never ran
        duration, bar = "", format_html('<span class="wf-none">{}</span>', span.status or "—")
    else:
        end = span.end if span.end is not None else now
        # in drawn seconds: the page scales them by its axis (--wf-shown, set by the axis
        # row), so a live run outgrowing its axis moves no bar of the page's
        left = axis.drawn(span.start)
        width = max(axis.drawn(end) - left, 0.0)
        duration = seconds_text(end - span.start)
        what = _running_text(span) if running else duration
        classes = f"wf-bar wf-{span.kind}" + (" wf-open" if running else "") + (
            f" wf-s-{span.status}" if span.status else "")
        style = f"--x:{left:.4f};--w:{width:.4f}"
        if row.group:
            bar = format_html('<span class="{}" style="{}" title="{}"></span>',
                              classes, style, f"{span.label}: {what}")
        else:
            # one click handler for every bar (data-get: static/planwatch/app.js), not
            # htmx's per element: a 645-bar plan swaps in without 645 elements to process
            bar = format_html(
                '<button type="button" class="{}" style="{}" data-get="{}" '
                'data-into="#waterfall-detail" aria-label="{}" '
                'title="{}"></button>', classes, style, urls.of(span),
                f"{span.label}: {what}", f"{span.label}: {what}")
    label = _running_text(span) if running and span.kind == "model" else span.label
    note = span.note if span.kind != "model" or not running else ""
    # a bar still open (a wait for an answer, a node, a call) keeps growing: its duration
    # ticks on the page from its start (static/planwatch/app.js), as the header's clocks do
    ticking = (format_html(' data-started="{}"',
                           (urls.origin + timedelta(seconds=span.start)).isoformat())
               if running and urls.origin is not None else "")
    inner = format_html(
        '<span class="wf-label" title="{}"><span class="wf-name">{}</span>{}'
        '<span class="wf-dur"{}>{}</span></span><span class="wf-track">{}</span>',
        span.label, label, format_html(' <span class="wf-note">{}</span>', note) if note else "",
        ticking, duration, bar)
    depth = f" wf-d{min(row.depth, 4)}"
    tag = "summary" if row.group else "div"
    return format_html('<{} class="wf-row wf-k-{}{}" id="wf-{}">{}</{}>', mark_safe(tag),
                       span.kind, depth, span.key, inner, mark_safe(tag))


def _running_text(span: Span) -> str:
    if span.kind == "model":
        return f"calling {span.label}…"
    if span.kind == "human":
        return "waiting…"
    return "running…"


__all__ = ["MODEL_FINISHED", "MODEL_KINDS", "MODEL_STARTED", "Drawn", "Span", "Summary",
           "WaterfallFold", "WaterfallView", "seconds_text", "summary",
           "tokens_text", "waterfall_view"]
