"""A run's figures, computed once: working time, waiting for people, model time, cost.

Every page, the REST API, the export and the OpenTelemetry spans show these figures, and
each takes them from :class:`FiguresFold` (events folded one at a time, as the trace's
folds take them), so a figure shown in two places is the same figure. Times are when
things happened (``RunEvent.at``), never when rows were written:

- the run's time runs from its first event to the event that ended it (to ``now`` while
  it has not ended);
- waiting for people is apart from working time, in two parts: questions waiting for an
  answer (asked → answered) and breakpoint pauses (paused → resumed or continued);
- model time is the union of the model calls' spans (parallel calls counted once), waits
  left out;
- cost is the sum of the calls' priced costs (None when none was priced).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

ASKED, ANSWERED = "interrupt_raised", "interrupt_answered"
PAUSED, GOES_ON = "run_paused", ("run_resumed", "run_continued")
ENDS = ("run_succeeded", "run_failed", "run_cancelled")
CALL_STARTED, CALL_FINISHED = "model_started", "model_finished"

Interval = tuple[float, float]


def moment(event: Mapping[str, Any]) -> datetime | None:
    """When an event's thing happened (``at``; ``created_at`` for a row without it)."""
    value = event.get("at") or event.get("created_at")
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


def union(spans: Iterable[Interval]) -> list[Interval]:
    """``spans`` merged: overlapping parts counted once."""
    merged: list[Interval] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        elif end > start:
            merged.append((start, end))
    return merged


def minus(spans: list[Interval], cut: list[Interval]) -> list[Interval]:
    """The parts of ``spans`` (merged) outside ``cut`` (merged)."""
    out: list[Interval] = []
    for start, end in spans:
        pieces = [(start, end)]
        for c0, c1 in cut:
            pieces = [p for a, b in pieces for p in ((a, min(b, c0)), (max(a, c1), b))
                      if p[1] > p[0]]
        out.extend(pieces)
    return out


def length(spans: Iterable[Interval]) -> float:
    """The seconds ``spans`` cover (summed as given)."""
    return sum(end - start for start, end in spans)


@dataclass(frozen=True)
class Figures:
    """A run's figures at one moment, in seconds (cost in USD)."""

    elapsed: float
    """From the run's first event to its end (or to the moment asked)."""
    answering: float
    """Waiting for people to answer questions (overlapping questions counted once)."""
    paused: float
    """Waiting at breakpoints for an operator to go on."""
    model: float
    """Model calls, parallel calls counted once, waits left out."""
    cost_usd: float | None
    model_calls: int
    open_wait: str = ""
    """The wait open at that moment: ``question``, ``paused`` or ""."""
    finished: bool = False
    known: bool = True
    """Whether any event was folded (a run whose log is not read yet has no figures)."""

    @property
    def waiting(self) -> float:
        """Waiting for people, answers and pauses together."""
        return self.answering + self.paused

    @property
    def working(self) -> float:
        """The run's time, its waits for people left out."""
        return max(self.elapsed - self.waiting, 0.0)

    def as_dict(self) -> dict[str, Any]:
        """The figures as the API, the export and the spans give them."""
        return {"working_seconds": round(self.working, 6),
                "waiting_seconds": round(self.waiting, 6),
                "answer_wait_seconds": round(self.answering, 6),
                "paused_seconds": round(self.paused, 6),
                "model_seconds": round(self.model, 6),
                "elapsed_seconds": round(self.elapsed, 6),
                "cost_usd": self.cost_usd, "model_calls": self.model_calls}


@dataclass
class FiguresFold:
    """Folds a run's events, in seq order, into what :meth:`at` needs."""

    origin: datetime | None = None
    end: float | None = None
    """Seconds from the origin to the event that ended the run (None while it runs)."""
    questions: dict[str, list[float | None]] = field(default_factory=dict)
    pauses: list[list[float | None]] = field(default_factory=list)
    calls: dict[str, list[float | None]] = field(default_factory=dict)
    cost: float | None = None
    _resumed: float | None = None

    def seconds(self, at: datetime) -> float:
        """``at`` as seconds since the run's first event."""
        return (at - self.origin).total_seconds() if self.origin is not None else 0.0

    def add(self, event: Mapping[str, Any]) -> None:
        """Fold one event (``event_dict`` form)."""
        at = moment(event)
        if at is None:
            return
        if self.origin is None:
            self.origin = at
        t = max(self.seconds(at), 0.0)
        kind = str(event["kind"])
        raw = event.get("payload")
        payload: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
        if self._resumed is not None and kind != ANSWERED:
            # a resume whose open questions got no answer event (withdrawn) ended them
            for span in self.questions.values():
                if span[1] is None:
                    span[1] = self._resumed
            self._resumed = None
        if kind == ASKED:
            self.questions.setdefault(str(payload.get("interrupt_id") or event["seq"]),
                                      [t, None])
        elif kind == ANSWERED:
            asked = self.questions.get(str(payload.get("interrupt_id") or ""))
            if asked is not None and asked[1] is None:
                asked[1] = max(t, asked[0] or 0.0)
        elif kind == PAUSED:
            self.pauses.append([t, None])
        elif kind in GOES_ON:
            for pause in self.pauses:
                if pause[1] is None:
                    pause[1] = t
            if any(span[1] is None for span in self.questions.values()):
                self._resumed = t  # their answers follow the resume in the log
        elif kind == CALL_STARTED:
            self.calls.setdefault(str(payload.get("call_id") or event["seq"]), [t, None])
        elif kind == CALL_FINISHED:
            latency = payload.get("latency_ms")
            began = t - latency / 1000 if isinstance(latency, (int, float)) else t
            span = self.calls.setdefault(str(payload.get("call_id") or event["seq"]),
                                         [began, None])
            span[1] = t
            cost = payload.get("cost")
            if isinstance(cost, dict) and isinstance(cost.get("total"), (int, float)):
                self.cost = (self.cost or 0.0) + float(cost["total"])
        elif kind in ENDS:
            self.end = t

    def at(self, now: datetime) -> Figures:
        """The figures as they stand at ``now`` (an open wait or call runs up to it)."""
        until = self.end if self.end is not None else max(self.seconds(now), 0.0)

        def spans(items: Iterable[list[float | None]]) -> list[Interval]:
            return union((a or 0.0, min(b if b is not None else until, until))
                         for a, b in items)

        questions = spans(self.questions.values())
        pauses = minus(spans(self.pauses), questions)
        model = minus(minus(spans(self.calls.values()), questions), pauses)
        open_wait = ""
        if self.end is None:
            if any(b is None for _, b in self.questions.values()) and self._resumed is None:
                open_wait = "question"
            elif any(b is None for _, b in self.pauses):
                open_wait = "paused"
        return Figures(elapsed=until, answering=length(questions), paused=length(pauses),
                       model=length(model), cost_usd=self.cost, model_calls=len(self.calls),
                       open_wait=open_wait, finished=self.end is not None,
                       known=self.origin is not None)


def figures_of(events: Iterable[Mapping[str, Any]], *, now: datetime) -> Figures:
    """The figures of a run from its events (``event_dict`` form, in seq order)."""
    fold = FiguresFold()
    for event in events:
        fold.add(event)
    return fold.at(now)
