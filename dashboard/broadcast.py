"""Doorbells on the channel layer: a group per run and one for the runs list.

Events are written to the database first; a broadcast only tells watchers there is
something new (and carries it, to save them a query). A lost message costs nothing: the
consumer notices the gap in ``seq`` and reads the database.
"""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from channels.layers import get_channel_layer

logger = logging.getLogger("planwatch.broadcast")

RUNS_GROUP = "runs"
INBOX_GROUP = "inbox"


def run_group(run_id: UUID | str) -> str:
    """The group of one run's watchers (only ``[a-z0-9-.]``, as Channels requires)."""
    return f"run.{run_id}"


async def abroadcast_events(run_id: UUID | str, events: list[dict[str, Any]], *,
                            run: dict[str, Any] | None = None,
                            committed_at: float | None = None) -> None:
    """Tell a run's watchers about newly committed events (and the run, if it changed).

    ``committed_at`` is when the write that committed them returned (Unix time, the
    writer's clock): what "committed → received" is measured from.
    """
    await _asend(run_group(run_id), {"type": "run.events", "run_id": str(run_id),
                                     "events": events, "run": run,
                                     "committed_at": committed_at})


async def abroadcast_run(summary: dict[str, Any], *, watchers: bool = True) -> None:
    """Tell the runs list (and, unless told with its events, the run's page) of a change."""
    await _asend(RUNS_GROUP, {"type": "run.changed", "run": summary})
    if watchers:
        await _asend(run_group(summary["id"]), {"type": "run.changed", "run": summary})


async def abroadcast_inbox() -> None:
    """Tell inbox watchers that the set of pending interrupts changed."""
    await _asend(INBOX_GROUP, {"type": "inbox.changed"})


async def _asend(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(group, message)
    except Exception:  # the database holds the truth; a doorbell may fail
        logger.warning("broadcast to %s failed", group, exc_info=True)
