"""A LangGraph SSE stream whose database read fails after the response started: it reads
again, and if that fails too it ends with an ``error`` event (never hangs open)."""

from __future__ import annotations

import asyncio

import pytest
from django.db import OperationalError

from dashboard import services
from dashboard.lgserver import stream
from tests.conftest import wait_run

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


def read_all(run_id) -> list[str]:
    """The stream's SSE events (values mode, no heartbeats), with a hang guard."""

    async def collect() -> list[str]:
        return [part.decode() async for part in stream.aevents(
            run_id, modes=("values",), subgraphs=False, after=0, keepalive=0)]

    return asyncio.run(asyncio.wait_for(collect(), 30))


def dropped(times: int):
    """A checkpoint read that fails ``times`` times as a killed backend does, then reads."""
    real = stream.PartMaker.checkpoint_of
    failures = [times]

    def checkpoint_of(self, event):
        if failures[0]:
            failures[0] -= 1
            raise OperationalError("terminating connection due to administrator command")
        return real(self, event)

    return checkpoint_of


@pytest.fixture
def finished_run(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 3}, user=operator)
    assert wait_run(run.id).status == "succeeded"
    return run


def test_a_failed_checkpoint_read_is_read_again(finished_run, monkeypatch):
    whole = read_all(finished_run.id)
    monkeypatch.setattr(stream.PartMaker, "checkpoint_of", dropped(2))
    assert read_all(finished_run.id) == whole
    assert not any(part.startswith("event: error") for part in whole)
    assert sum(part.startswith("event: values") for part in whole) >= 3


def test_a_read_failing_for_good_ends_the_stream_with_an_error_event(finished_run,
                                                                     monkeypatch):
    monkeypatch.setattr(stream.PartMaker, "checkpoint_of", dropped(1000))
    parts = read_all(finished_run.id)
    assert parts[0].startswith("event: metadata")
    assert parts[-1].startswith("event: error")
    assert "OperationalError" in parts[-1] and "Last-Event-ID" in parts[-1]
