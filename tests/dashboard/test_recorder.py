"""The event writer: numbering, writing behind the graph, and the final write."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from dashboard.models import Run
from dashboard.recorder import EventWriter


class SlowSink:
    """A sink that records what it is asked to write and takes ``seconds`` for each write."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.writes: list[tuple[list[int], str | None]] = []

    async def awrite(self, run: Run, rows: list[dict[str, Any]], *, current_node: str,
                     now: Any, final: dict[str, Any] | None = None) -> dict[str, Any]:
        self.writes.append(([r["seq"] for r in rows], final and final["status"]))
        await asyncio.sleep(self.seconds)
        return {"id": str(run.id), "graph": run.graph, "current_node": current_node,
                "status": final["status"] if final else Run.Status.RUNNING,
                "last_seq": rows[-1]["seq"] if rows else run.last_seq}


def _writer(sink: SlowSink, interval: float) -> EventWriter:
    run = Run(id=uuid.uuid4(), graph="test.echo", status=Run.Status.RUNNING)
    return EventWriter(run, next_seq=1, sink=sink, interval=interval)  # type: ignore[arg-type]


async def test_events_after_a_quiet_spell_are_written_at_once_then_batched():
    sink = SlowSink(0.02)
    writer = _writer(sink, interval=0.05)
    writer.add({"kind": "run_started"})
    writer.flush_behind()
    await asyncio.sleep(0)
    assert sink.writes == [([1], None)]  # not held back by the interval
    for kind in ("node_started", "node_finished", "checkpoint"):
        writer.add({"kind": kind})
        writer.flush_behind()  # a write is in flight: these wait for the next one
    await asyncio.sleep(0.2)
    assert sink.writes == [([1], None), ([2, 3, 4], None)]


async def test_the_final_write_does_not_wait_out_the_interval_of_a_write_in_flight():
    # The write behind is in flight when the run ends; it must not go on to wait for its
    # next interval (an hour here) before the final write may land.
    sink = SlowSink(0.05)
    writer = _writer(sink, interval=3600)
    writer.add({"kind": "run_started"})
    writer.flush_behind()
    await asyncio.sleep(0)
    writer.add({"kind": "run_succeeded"})
    await asyncio.wait_for(writer.afinish(status=Run.Status.SUCCEEDED), 5)
    assert sink.writes == [([1], None), ([2], Run.Status.SUCCEEDED)]
