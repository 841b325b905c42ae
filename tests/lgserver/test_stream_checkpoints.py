"""A stream's ``values`` part is read from the checkpoint its event names: one whose save
is late (written by the executor after a second, under load) is read again, not sent
without the state; one of an old event that was never saved is not waited for."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from dashboard.lgserver import stream
from dashboard.models import RunEvent

pytestmark = pytest.mark.django_db


def checkpoint_event(written: datetime) -> dict[str, Any]:
    return {"kind": RunEvent.Kind.CHECKPOINT, "namespace": "", "checkpoint_id": "cp-1",
            "step": 1, "seq": 7, "payload": {"source": "loop", "next": ["work"]},
            "created_at": written.isoformat()}


class LateSave(stream.PartMaker):
    """A part maker whose saver has the checkpoint only from the ``saved_at``-th read."""

    def __init__(self, saved_at: int) -> None:
        super().__init__(SimpleNamespace(conversation_id="t-1", thread_id="t-1:planner",
                                         graph="test.echo", id="r-1"),
                         ["values"], subgraphs=False)
        self.saved_at, self.reads = saved_at, 0

    def checkpoint_of(self, event: dict[str, Any]) -> Any:
        self.reads += 1
        return SimpleNamespace(values={"n": 3}) if self.reads >= self.saved_at else None


def parts_of(maker: LateSave, event: dict[str, Any]) -> list[tuple[str, Any]]:
    async def read() -> list[tuple[str, Any]]:
        return maker.parts(event, await stream._asaved(maker, event))
    return async_to_sync(read)()


def test_a_checkpoint_saved_late_is_read_again_and_its_values_sent(monkeypatch):
    monkeypatch.setattr(stream, "SAVE_WAITS", (0.01,) * 5)
    maker = LateSave(saved_at=3)
    assert parts_of(maker, checkpoint_event(datetime.now(UTC))) == [("values", {"n": 3})]
    assert maker.reads == 3


def test_an_old_event_whose_checkpoint_is_gone_is_not_waited_for(monkeypatch):
    monkeypatch.setattr(stream, "SAVE_WAITS", (5.0,))  # a wait would show as a timeout
    maker = LateSave(saved_at=99)

    async def read() -> list[tuple[str, Any]]:
        event = checkpoint_event(datetime.now(UTC) - timedelta(minutes=5))
        view = await asyncio.wait_for(stream._asaved(maker, event), 1.0)
        return maker.parts(event, view)

    assert async_to_sync(read)() == []  # no values part rather than an empty state
    assert maker.reads == 1
