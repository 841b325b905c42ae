"""Clients of the LangGraph API under test: the official async SDK on a wide transport,
what a run's stream must deliver, crons that fire every second."""

from __future__ import annotations

import time

import httpx

from dashboard.models import Run, RunEvent
from tests.conftest import assert_gapless

Kind = RunEvent.Kind
STREAMED = (Kind.NODE_STARTED, Kind.NODE_FINISHED, Kind.NODE_FAILED)
"""The log events the ``tasks`` stream mode turns into parts (each carrying its seq)."""
EVERY_SECOND = "* * * * * *"  # croniter's sixth field: seconds (the test's fast tick)


def wait_for(check, timeout: float = 60):
    """Poll until ``check()`` is truthy (a deadlock guard, not a speed test)."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)
    return found


def async_sdk_client(url: str, key: str):
    """The official async client on a transport that allows more than httpx's 100."""
    from langgraph_sdk.client import LangGraphClient

    http = httpx.AsyncClient(
        base_url=url, headers={"x-api-key": key},
        limits=httpx.Limits(max_connections=1000, max_keepalive_connections=1000),
        timeout=httpx.Timeout(connect=30, read=300, write=60, pool=60))
    return LangGraphClient(http)


def expected_ids(run_id: str) -> list[int]:
    """The event ids a ``tasks`` stream of the run must deliver: its log's node events
    (the log checked gapless first)."""
    run = Run.objects.get(id=run_id)
    assert_gapless(run)
    return list(run.events.filter(kind__in=STREAMED).order_by("seq")
                .values_list("seq", flat=True))
