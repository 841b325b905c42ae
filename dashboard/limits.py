"""Limits on what one user, and one process, may hold open at once.

A stream (an SSE response of ``/langgraph/``, a trace page's websocket) takes a slot for
as long as it is open; past ``PLANWATCH_MAX_STREAMS_PER_USER`` or
``PLANWATCH_MAX_STREAMS_PER_PROCESS`` the next one is refused with
:class:`~dashboard.services.LimitReached` (429, or the websocket close code 4429).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from dashboard.runs import instruments
from dashboard.runs.conf import planwatch_setting
from dashboard.services import LimitReached

_lock = threading.Lock()
_open: Counter[Any] = Counter()  # open streams by user key, and in all under None


class StreamSlot:
    """One open stream of a user in this process; :meth:`close` gives it back (once)."""

    def __init__(self, user_key: Any) -> None:
        self.user_key = user_key
        self.closed = False

    def close(self) -> None:
        """Give the slot back (a second call does nothing)."""
        with _lock:
            if self.closed:
                return
            self.closed = True
            instruments.STREAMS_OPEN.dec()
            for key in (self.user_key, None):
                _open[key] -= 1
                if _open[key] <= 0:
                    del _open[key]


def stream_slot_take(*, user: Any) -> StreamSlot:
    """A slot for one more open stream of ``user``, or :class:`LimitReached` past a limit."""
    per_user = int(planwatch_setting("MAX_STREAMS_PER_USER"))
    per_process = int(planwatch_setting("MAX_STREAMS_PER_PROCESS"))
    key = ("user", getattr(user, "pk", None))
    with _lock:
        if _open[None] >= per_process:
            raise LimitReached(
                f"this server process has {_open[None]} streams open, its limit "
                f"(PLANWATCH_MAX_STREAMS_PER_PROCESS={per_process}); close a stream, retry "
                "later, or serve from more processes", limit="PLANWATCH_MAX_STREAMS_PER_PROCESS")
        if _open[key] >= per_user:
            raise LimitReached(
                f"you have {_open[key]} streams open, your limit "
                f"(PLANWATCH_MAX_STREAMS_PER_USER={per_user}); close one of them first",
                limit="PLANWATCH_MAX_STREAMS_PER_USER")
        _open[key] += 1
        _open[None] += 1
        instruments.STREAMS_OPEN.inc()
    return StreamSlot(key)


def streams_open() -> int:
    """How many streams this process holds open now."""
    with _lock:
        return _open[None]


class SlottedStream:
    """A streaming response's content that gives its slot back when it ends or is closed
    (Django closes streaming content that has a ``close``, whether it was read or not)."""

    def __init__(self, content: AsyncIterator[bytes], slot: StreamSlot) -> None:
        self.content = content
        self.slot = slot

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """The content, then the slot given back."""
        try:
            async for part in self.content:
                yield part
        finally:
            self.slot.close()

    def close(self) -> None:
        """Give the slot back."""
        self.slot.close()
