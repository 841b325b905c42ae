"""The engine's way to the ORM from async code: one decorator, one connection kept.

Like channels' ``database_sync_to_async``, :func:`database_sync_to_async` runs a sync ORM
helper in asgiref's worker thread; unlike it, it keeps that thread's connection across
calls (see :func:`_usable_connection`), as the engine's writes come from one long-lived
loop, not from requests.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection

from dashboard.runs.conf import planwatch_setting


def _usable_connection() -> None:
    """Keep this thread's connection across writes; replace it only once it is broken.

    The executor's database work runs on one long-lived thread, not per request, so
    Django's per-request ``close_old_connections()`` would reconnect on every flush
    (with ``CONN_MAX_AGE=0``: a new PostgreSQL connection, or SQLite's PRAGMAs, each time).
    """
    if connection.connection is not None and connection.errors_occurred:
        if not connection.is_usable():
            connection.close()
        connection.errors_occurred = False


def database_sync_to_async[**P, R](func: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """``func`` as a coroutine run in asgiref's worker thread, on a usable connection."""

    @functools.wraps(func)
    def on_usable_connection(*args: P.args, **kwargs: P.kwargs) -> R:
        _usable_connection()
        return func(*args, **kwargs)

    return sync_to_async(on_usable_connection)


def relaxed_commits() -> bool:
    """Whether executor bookkeeping may commit without waiting for the WAL flush (see
    :mod:`dashboard.runs.store`)."""
    return not planwatch_setting("SYNC_EVENT_COMMITS")


def relax_commit() -> None:
    """Inside a transaction: let it commit without waiting for the WAL (see the store)."""
    if connection.vendor == "postgresql" and relaxed_commits():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
