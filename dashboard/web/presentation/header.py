"""What the trace header says: a run's status, node and elapsed time, live or at a replayed seq.

Live, the header is the run row (kept current by doorbells); in replay it is folded from
the events up to the chosen seq, so ``?at=60`` shows the run as it stood at event 60, not
as it ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from dashboard.models import Run, RunEvent
from dashboard.runs import states
from dashboard.runs.figures import Figures
from dashboard.runs.outcome import Told
from dashboard.runs.store import ROLLUPS, model_call
from dashboard.web.presentation.trace import run_duration
from dashboard.web.presentation.waterfall import seconds_text

Kind = RunEvent.Kind
STATUS_AFTER = states.STATUS_AFTER
"""The status a run has right after an event of this kind (the state machine's)."""


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th`` … ``11th``, ``12th``, ``21st``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def status_label(status: str, queue_position: int | None = None) -> str:
    """A status as people read it: ``Waiting for you``; a queued run's place in the line for
    a slot, ``Queued, 3rd in line``."""
    label = Run.Status(status).label if status in Run.Status.values else status
    if status == Run.Status.QUEUED and queue_position:
        return f"{label}, {ordinal(queue_position)} in line"
    return str(label)


@dataclass(frozen=True)
class Head:
    """The header's facts: status (value and label), current node, elapsed, since when."""

    status: str
    node: str
    duration: str
    started_at: str = ""
    """ISO time the run started, while it is active (the page ticks the duration from it)."""
    model_calls: int = 0
    input_tokens: int | None = None
    """Tokens as the models reported them (None: not reported)."""
    output_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = None
    """USD from PLANWATCH_MODEL_PRICES (None: no call's model is priced)."""
    queue_position: int | None = None
    """A queued run's place in the line for a slot (1: next), as the page was read."""
    working: str = ""
    """Time the run worked, its waits for people left out ("" in replay)."""
    waiting: str = ""
    """Time the run waited for people (questions, breakpoints); "" when it never did."""
    working_since: str = ""
    """While it works: the ISO time from which the page ticks the working time."""
    waiting_since: str = ""
    """While it waits for people: the ISO time from which the page ticks the wait."""
    outcome: Told | None = None
    """A finished run's outcome where its status alone would mislead (a failed plan, a
    budget that stopped it), as stored when it stopped."""

    @property
    def status_label(self) -> str:
        """The status as people read it (``Waiting for you``, ``Queued, 3rd in line``,
        ``Finished — plan failed``)."""
        if self.outcome is not None:
            return self.outcome.headline
        return status_label(self.status, self.queue_position)

    @property
    def badge(self) -> str:
        """The class of its badge: the status's, or the failed outcome's."""
        return "outcome-failed" if self.outcome is not None else f"status-{self.status}"

    @property
    def is_finished(self) -> bool:
        """Whether the run had ended at this point."""
        return self.status in Run.FINISHED


def elapsed_seconds(run: Run, *, now: datetime | None = None) -> float | None:
    """Seconds from the run's start to its end (to ``now`` while it is not finished);
    None before it started."""
    if run.started_at is None:
        return None
    end = run.finished_at or now or timezone.now()
    return max((end - run.started_at).total_seconds(), 0.0)


def elapsed_text(run: Run) -> str:
    """:func:`elapsed_seconds` for people (``12.3 s``, ``8 min 05 s``), ``—`` before the start."""
    seconds = elapsed_seconds(run)
    return "—" if seconds is None else seconds_text(seconds)


WAITING_FOR_PEOPLE = (Run.Status.INTERRUPTED, Run.Status.PAUSED)
"""The statuses in which a run's clock counts a wait for people, not work."""


@dataclass(frozen=True)
class Clocks:
    """A run's working time and its waits for people as a page shows them, with the
    moments from which the page ticks the one that runs (the header, the runs list)."""

    working: str
    waiting: str
    """"" when the run never waited for people."""
    working_since: str = ""
    waiting_since: str = ""


def run_clocks(run: Run, figures: Figures | None, *, now: datetime | None = None) -> Clocks:
    """:class:`Clocks` of ``run`` from its ``figures`` (:mod:`dashboard.runs.figures`, the
    same the waterfall, the API and the export show); its elapsed time without them."""
    now = now or timezone.now()
    active = run.started_at is not None and not run.is_finished
    if figures is not None and figures.known and run.started_at is not None:
        working: float | None = figures.working
        waited = figures.waiting
    else:
        working, waited = elapsed_seconds(run, now=now), 0.0
    waiting_now = active and run.status in WAITING_FOR_PEOPLE

    def since(seconds: float) -> str:  # the page ticks "now - since" between renders
        return (now - timedelta(seconds=seconds)).isoformat()

    return Clocks(working=seconds_text(working) if working is not None else "—",
                  waiting=seconds_text(waited) if waited > 0 or waiting_now else "",
                  working_since=since(working) if active and not waiting_now and working
                  is not None else "",
                  waiting_since=since(waited) if waiting_now else "")


def run_head(run: Run, *, figures: Figures | None = None) -> Head:
    """The header of a run as it stands now (its place in the line if it was read with
    ``Run.objects.with_queue_position()``); with ``figures`` (folded from its events, see
    :mod:`dashboard.runs.figures`, the same the waterfall, the API and the export show)
    its working time and its waits for people apart."""
    now = timezone.now()
    active = run.started_at is not None and not run.is_finished
    clocks = run_clocks(run, figures, now=now)
    return Head(status=run.status, node=run.current_node, duration=run_duration(run),
                started_at=run.started_at.isoformat() if active and run.started_at else "",
                queue_position=getattr(run, "queue_position", None),
                working=clocks.working, waiting=clocks.waiting,
                working_since=clocks.working_since, waiting_since=clocks.waiting_since,
                outcome=run.told,
                **{name: getattr(run, name) for name in ROLLUPS})


def replay_head(events: list[dict[str, Any]], *, current: str, run: Run | None = None) -> Head:
    """The header as it stood after the last of ``events`` (``event_dict`` form, in order);
    replayed to the end of ``run``, its status and outcome are the ones stored when it
    stopped (``Run.outcome``, as the live header, the API and the export read them: a
    failed plan's last event is a ``run_succeeded``, a budget's stop a ``run_cancelled``)."""
    status = Run.Status.QUEUED.value
    started = None
    calls = Run()  # the rollups as they stood: counted from the calls finished so far
    for event in events:
        status = STATUS_AFTER.get(event["kind"], status)
        if event["kind"] == Kind.MODEL_FINISHED:
            cost = event["payload"].get("cost")
            for name, value in model_call(calls, usage=event["payload"].get("usage"),
                                          cost=cost["total"] if cost else None).items():
                setattr(calls, name, value)
        if started is None and event["kind"] in (Kind.RUN_STARTED, Kind.RUN_RESUMED):
            started = parse_datetime(event["at"] or "")
    at = parse_datetime(events[-1]["at"] or "") if events else None
    duration = f"{(at - started).total_seconds():.1f} s" if started and at else "—"
    ended = run is not None and run.is_finished and bool(events) \
        and events[-1]["seq"] >= run.last_seq
    return Head(status=run.status if ended and run else str(status), node=current,
                duration=duration, outcome=run.told if ended and run else None,
                **{name: getattr(calls, name) for name in ROLLUPS})
