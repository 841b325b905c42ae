"""What the history of questions shows: one row per question that no longer waits, the
same on the page, in the CSV export and in the REST API."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any

from dashboard.models import Interrupt
from dashboard.selectors import HISTORY_OUTCOMES
from dashboard.web.forms.interrupts import question_summary

COLUMNS = ("run", "graph", "question", "outcome", "answer", "answered_by", "channel",
           "asked_at", "answered_at", "waited_seconds")
"""The history's columns, in the order the CSV export writes them."""


OUTCOMES = {status: name for name, status in HISTORY_OUTCOMES.items()}


def history_row(interrupt: Interrupt) -> dict[str, Any]:
    """One question's history: what was asked, what became of it, who or what answered,
    through which channel, when, and how long it waited (None unless answered)."""
    summary = question_summary(interrupt.payload)
    answered = interrupt.status == Interrupt.Status.ANSWERED
    waited: timedelta | None = getattr(interrupt, "waited", None)
    return {
        "id": interrupt.pk, "run": str(interrupt.run_id), "graph": interrupt.run.graph,
        "question": (f"{summary['title']}: " if summary["title"] else "") + summary["text"],
        "outcome": OUTCOMES.get(Interrupt.Status(interrupt.status), "withdrawn"),
        "answer": interrupt.answer if answered else None,
        "answered_by": interrupt.answerer_name if answered else "",
        "channel": interrupt.answered_via if answered else "",
        "channel_label": (Interrupt.Channel(interrupt.answered_via).label
                          if answered and interrupt.answered_via else ""),
        "asked_at": interrupt.created_at, "answered_at": interrupt.answered_at,
        "deadline_at": interrupt.deadline_at,
        "waited_seconds": round(waited.total_seconds(), 3) if answered and waited else None,
    }


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")
"""What a spreadsheet may read as the start of a formula: OWASP's list (``=``, ``+``, ``-``,
``@``, tab, carriage return; line feed too) and their full-width forms, which some
spreadsheets fold to the ASCII ones."""


def _cell(value: Any) -> Any:
    """A value a spreadsheet shows as written: JSON for structures, and text that would
    start a formula (:data:`FORMULA_STARTS`, also after leading spaces) led by an
    apostrophe."""
    if value is None:
        return ""
    if not isinstance(value, str):
        return value if isinstance(value, int | float) else json.dumps(value, default=str)
    return f"'{value}" if value.lstrip(" ").startswith(FORMULA_STARTS) else value


def csv_lines(rows: Iterable[Interrupt]) -> Iterator[list[Any]]:
    """The header, then one list of cells per question (times in ISO 8601, UTC)."""
    yield list(COLUMNS)
    for interrupt in rows:
        row = history_row(interrupt)
        yield [row["run"], row["graph"], _cell(row["question"]), row["outcome"],
               _cell(row["answer"]), _cell(row["answered_by"]),
               row["channel"], row["asked_at"].isoformat(),
               row["answered_at"].isoformat() if row["answered_at"] else "",
               "" if row["waited_seconds"] is None else row["waited_seconds"]]
