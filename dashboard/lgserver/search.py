"""Threads and runs as the LangGraph API lists them: filtered, ordered and paged in SQL.

A thread's status is a column of its own (``Thread.status``, written with its runs'
transitions), so a search reads one page of threads, never all of them.
Who sees which thread is :mod:`dashboard.policy`'s: the threads a user created, or every
thread for the team (``dashboard.view_all_threads``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from dashboard import policy, selectors
from dashboard.models import Thread
from dashboard.runs import states

THREAD_STATUSES = tuple(Thread.Status.values)
THREAD_SORTABLE = {"thread_id": "id", "status": "status", "created_at": "created_at",
                   "updated_at": "updated_at"}
"""LangGraph's thread sort keys and the columns they sort (its ``state_updated_at`` is no
column here: refused, naming these)."""


def with_order_by(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A thread search's body, Aegra's ``order_by`` (``"updated_at ASC"``: a sort key, then
    ``ASC`` or, by default, descending) read as ``sort_by`` and ``sort_order`` when no
    ``sort_by`` is sent. One that names no sort key is ignored, as LangGraph's server
    ignores the field (Aegra falls back to its default order too)."""
    words = str(data.get("order_by") or "").split()
    if data.get("sort_by") or not words or words[0].lower() not in THREAD_SORTABLE:
        return data
    ascending = len(words) > 1 and words[1].lower() == "asc"
    return {**data, "sort_by": words[0].lower(), "sort_order": "asc" if ascending else "desc"}


RUN_STATUSES = states.LANGGRAPH_STATUSES
"""The statuses a LangGraph run list filters by (in SQL: ``LangGraphRun.objects``'
``with_langgraph_status``)."""


def max_offset() -> int:
    """How deep a list may be paged with ``offset`` (``PLANWATCH_MAX_SEARCH_OFFSET``)."""
    return int(getattr(settings, "PLANWATCH_MAX_SEARCH_OFFSET", 10_000))


def visible_threads(user: Any) -> QuerySet[Thread]:
    """The threads ``user`` may see and act on (:func:`dashboard.policy.threads_visible`)."""
    return policy.threads_visible(user)


def metadata_match(threads: QuerySet[Thread], metadata: dict[str, Any]) -> QuerySet[Thread]:
    """Threads whose metadata has each key with exactly that JSON value
    (:func:`dashboard.selectors.metadata_match`); ``graph_id`` and ``assistant_id`` are the
    thread's graph."""
    graph = {k: v for k, v in metadata.items() if k in ("graph_id", "assistant_id")}
    for value in graph.values():
        threads = threads.filter(graph=value if isinstance(value, str) else "\x00")
    return selectors.metadata_match(
        threads, {k: v for k, v in metadata.items() if k not in graph})
