"""When each background duty of this process last went round, and what that says (a leaf
module: the duties' loops note their rounds here; ``/readyz`` and the Crons page read it)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from dashboard.runs.conf import planwatch_setting

DUTIES = {"crons": "CRON_POLL_SECONDS", "deadlines": "NOTICE_POLL_SECONDS"}
"""Each duty with a loop of its own, and the setting that says how often it goes round."""

STARTED: set[str] = set()  # "duties", once this process started them
_beats: dict[str, float] = {}  # duty -> time.monotonic() of its loop's last round


def duty_beat(name: str) -> None:
    """A duty's loop went round (called by the loop, each round)."""
    _beats[name] = time.monotonic()


@dataclass(frozen=True)
class DutySeen:
    """One duty in this process: whether its loop goes round, and when it last did."""

    name: str
    ok: bool
    age: float | None  # seconds since its last round (None: never)
    problem: str = ""


def duties_seen() -> list[DutySeen]:
    """Each duty of this process: running, or why not (not started, or its loop stuck:
    no round within three of its intervals, and at least 30 s)."""
    seen = []
    now = time.monotonic()
    for name, setting in DUTIES.items():
        beat = _beats.get(name)
        age = None if beat is None else now - beat
        limit = max(30.0, 3 * float(planwatch_setting(setting)))
        if not STARTED:
            problem = ("not running in this process: serve config.asgi:application (manage.py "
                       "serve, daphne or uvicorn), which starts it")
        elif age is not None and age > limit:
            problem = f"its loop last went round {age:.0f} s ago: it is stuck"
        else:
            problem = ""
        seen.append(DutySeen(name, not problem, age, problem))
    return seen
