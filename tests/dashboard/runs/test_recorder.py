"""The event writer: numbering, writing behind the graph, and the final write."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from dashboard.models import Run
from dashboard.runs import doorbells as broadcast
from dashboard.runs.execution import EventWriter
from dashboard.runs.record import WriteBehind

pytestmark = pytest.mark.pg


class SlowSink:
    """A store that records what it is asked to write and takes ``seconds`` for each write.

    ``writes``: one entry a write, ``(seqs, final status)`` for a single run's write, or a
    list of those for a write of several runs together.
    """

    def __init__(self, seconds: float, fail_with: str | None = None) -> None:
        self.seconds = seconds
        self.fail_with = fail_with  # a node name: a write of several runs with it fails
        self.writes: list[Any] = []

    @staticmethod
    def _summary(run: Run, rows: list[dict[str, Any]], node: str, status: str
                 ) -> dict[str, Any]:
        return {"id": str(run.id), "graph": run.graph, "current_node": node, "status": status,
                "last_seq": rows[-1]["seq"] if rows else run.last_seq, "started_at": None,
                "finished_at": None, "error_message": "", "model_calls": 0,
                "input_tokens": None, "output_tokens": None, "total_tokens": None,
                "cost_usd": None}

    async def aprogress(self, batches: list[Any], *, now: Any) -> list[dict[str, Any]]:
        if len(batches) > 1 and any(node == self.fail_with for _, _, node in batches):
            raise ValueError("a bad row")
        entries = [([r["seq"] for r in rows], None) for _, rows, _ in batches]
        self.writes.append(entries[0] if len(entries) == 1 else entries)
        await asyncio.sleep(self.seconds)
        return [self._summary(run, rows, node, Run.Status.RUNNING) for run, rows, node in batches]

    async def astop(self, run: Run, rows: list[dict[str, Any]], *, current_node: str,
                     now: Any, final: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(([r["seq"] for r in rows], final["status"]))
        await asyncio.sleep(self.seconds)
        return self._summary(run, rows, current_node, final["status"])


async def until(condition: Any) -> None:
    """Wait until ``condition()`` holds (the writer works on its own timers), or fail
    after 10 s."""
    async with asyncio.timeout(10):
        while not condition():  # noqa: ASYNC110 - the writer has no event to wait on
            await asyncio.sleep(0.005)


def _writer(sink: SlowSink | None, interval: float, digest: broadcast.RunsDigest | None = None,
            behind: WriteBehind | None = None) -> EventWriter:
    run = Run(id=uuid.uuid4(), graph="test.echo", state=Run.State.RUNNING,
              status=Run.Status.RUNNING)  # as a claim leaves it
    return EventWriter(run, next_seq=1, store=sink, interval=interval,  # type: ignore[arg-type]
                       digest=digest, behind=behind)


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, dict[str, Any]]]:
    """What the writer tells the channel layer: (group, message) pairs."""
    out: list[tuple[str, dict[str, Any]]] = []

    async def record(group: str, message: dict[str, Any]) -> None:
        out.append((group, message))

    monkeypatch.setattr(broadcast, "asend", record)
    return out


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
    await until(lambda: len(sink.writes) == 2)
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
    await asyncio.wait_for(writer.afinish(status=Run.State.SUCCEEDED), 5)
    assert sink.writes == [([1], None), ([2], Run.Status.SUCCEEDED)]


async def test_node_moves_reach_the_runs_list_in_digests_and_status_changes_at_once(sent):
    digest = broadcast.RunsDigest(interval=0.05)
    writer = _writer(SlowSink(0), interval=0, digest=digest)
    for node in ("plan", "work", "join"):
        writer.current_node = node
        writer.add({"kind": "node_started", "node": node})
        await writer.aflush()
    listed = [m for group, m in sent if group == broadcast.RUNS_GROUP]
    assert listed == []  # three moves, none told one by one
    await until(lambda: any(group == broadcast.RUNS_GROUP for group, _ in sent))
    listed = [m for group, m in sent if group == broadcast.RUNS_GROUP]
    assert [m["type"] for m in listed] == ["runs.moved"]
    assert [r["current_node"] for r in listed[0]["runs"]] == ["join"]  # the latest move only
    # every write still rang the run's own watchers, with the run when it moved
    events = [m for group, m in sent if group == broadcast.run_group(writer.run.id)]
    assert [m["run"]["current_node"] for m in events] == ["plan", "work", "join"]

    writer.current_node = "synth"
    writer.add({"kind": "node_started", "node": "synth"})
    await writer.aflush()  # a move, pending in the digest …
    writer.add({"kind": "run_succeeded"})
    await writer.afinish(status=Run.State.SUCCEEDED)  # … overtaken by the final status
    await asyncio.sleep(0.1)  # the digest's interval (0.05 s) passes: nothing more is told
    listed = [m for group, m in sent if group == broadcast.RUNS_GROUP][1:]
    assert [(m["type"], m["run"]["status"]) for m in listed] == [("run.changed", "succeeded")]


async def test_the_events_of_many_runs_are_written_together(sent):
    sink = SlowSink(0.02)
    behind = WriteBehind(sink, interval=0.05)  # type: ignore[arg-type]
    writers = [_writer(None, 0, behind=behind) for _ in range(3)]
    for writer in writers:
        writer.add({"kind": "run_started"})
        writer.flush_behind()
    await asyncio.sleep(0)  # the first write takes every run's events at once …
    for writer in writers:
        writer.add({"kind": "node_started"})
        writer.add({"kind": "node_finished"})
        writer.flush_behind()
    await until(lambda: sum(m["type"] == "run.events" for _, m in sent) == 6)  # … the next,
    # every run's again (each write rings its runs' watchers once it is done)
    assert sink.writes == [[([1], None)] * 3, [([2, 3], None)] * 3]
    # every run rang its own watchers once a write, with its own events
    rung = sorted((g, m["first"], m["last"]) for g, m in sent if m["type"] == "run.events")
    assert rung == sorted((broadcast.run_group(w.run.id), first, last)
                          for w in writers for first, last in ((1, 1), (2, 3)))


async def test_a_write_of_several_runs_that_fails_is_written_run_by_run(sent):
    sink = SlowSink(0, fail_with="bad")
    behind = WriteBehind(sink, interval=0.05)  # type: ignore[arg-type]
    good, bad = _writer(None, 0, behind=behind), _writer(None, 0, behind=behind)
    bad.current_node = "bad"
    for writer in (good, bad):
        writer.add({"kind": "run_started"})
    good.flush_behind()
    bad.flush_behind()
    await until(lambda: sum(m["type"] == "run.events" for _, m in sent) == 2)
    # together they failed; each on its own was written, so neither lost its events
    assert ([1], None) in sink.writes and sink.writes.count(([1], None)) == 2
    assert {m["run_id"] for _, m in sent if m["type"] == "run.events"} == {
        str(good.run.id), str(bad.run.id)}


async def test_the_final_write_takes_the_events_still_waiting_for_the_next_write():
    sink = SlowSink(0)
    writer = _writer(sink, interval=3600)
    writer.add({"kind": "run_started"})
    writer.flush_behind()
    await asyncio.sleep(0)  # written at once; the next write would wait an hour
    writer.add({"kind": "node_started"})
    writer.flush_behind()
    writer.add({"kind": "run_succeeded"})
    await asyncio.wait_for(writer.afinish(status=Run.State.SUCCEEDED), 5)
    assert sink.writes == [([1], None), ([2, 3], Run.Status.SUCCEEDED)]


class OverlapSink(SlowSink):
    """Records, for each final write, how many other writes were in flight as it began."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.flying = 0
        self.overlaps: list[int] = []

    async def aprogress(self, batches: list[Any], *, now: Any) -> list[dict[str, Any]]:
        self.flying += 1
        try:
            return await super().aprogress(batches, now=now)
        finally:
            self.flying -= 1

    async def astop(self, run: Run, rows: list[dict[str, Any]], *, current_node: str,
                    now: Any, final: dict[str, Any]) -> dict[str, Any]:
        self.overlaps.append(self.flying)
        return await super().astop(run, rows, current_node=current_node, now=now,
                                   final=final)


async def test_the_final_write_is_the_last_even_if_the_run_was_noted_again_meanwhile():
    # The final write waits for the write in flight; meanwhile the run is noted again (its
    # checkpoint saved), and the next write behind may take its last rows: the final
    # status must not be written beside it (on PostgreSQL it committed first under load: a
    # succeeded run read with last_seq 23, its log up to 25)
    sink = OverlapSink(0.05)
    writer = _writer(sink, interval=0)
    writer.add({"kind": "run_started"})
    writer.flush_behind()
    await asyncio.sleep(0)  # in flight
    writer.add({"kind": "checkpoint"})
    writer.add({"kind": "run_succeeded"})
    finishing = asyncio.create_task(writer.afinish(status=Run.State.SUCCEEDED))
    await asyncio.sleep(0)  # the final write waits for the one in flight
    writer.behind.note(writer)
    await asyncio.wait_for(finishing, 5)
    assert sink.overlaps == [0], "the final status was written beside a write of its rows"
    assert sink.writes[-1][1] == Run.Status.SUCCEEDED
    assert [seq for seqs, _ in sink.writes for seq in seqs] == [1, 2, 3]


class FlakySink(SlowSink):
    """Fails its first ``failures`` writes (a dropped connection), then writes."""

    def __init__(self, failures: int) -> None:
        super().__init__(0)
        self.failures = failures

    async def aprogress(self, batches: list[Any], *, now: Any) -> list[dict[str, Any]]:
        if self.failures:
            self.failures -= 1
            raise OSError("server closed the connection unexpectedly")
        return await super().aprogress(batches, now=now)


async def test_a_failed_write_is_retried_with_its_rows_so_no_seq_is_lost(sent, monkeypatch):
    monkeypatch.setattr(WriteBehind, "RETRY_PAUSE", 0.01)
    sink = FlakySink(failures=2)
    writer = _writer(sink, interval=0)  # type: ignore[arg-type]
    writer.add({"kind": "run_started"})
    writer.add({"kind": "node_started"})
    writer.flush_behind()
    await until(lambda: len(sink.writes) == 1)
    writer.add({"kind": "node_finished"})
    writer.flush_behind()
    await until(lambda: len(sink.writes) == 2)
    written = [seq for seqs, _ in sink.writes for seq in seqs]
    assert written == [1, 2, 3]  # the failed rows first, in order, then the rest


async def test_a_write_that_keeps_failing_leaves_its_rows_to_the_final_write(sent, monkeypatch):
    monkeypatch.setattr(WriteBehind, "RETRY_PAUSE", 0.001)
    sink = FlakySink(failures=WriteBehind.RETRIES + 1)
    writer = _writer(sink, interval=0)  # type: ignore[arg-type]
    writer.add({"kind": "run_started"})
    writer.flush_behind()
    await until(lambda: sink.failures == 0)  # every attempt made and failed
    await asyncio.sleep(0)
    assert sink.writes == [] and [r["seq"] for r in writer.buffer] == [1]
    writer.add({"kind": "run_succeeded"})
    await asyncio.wait_for(writer.afinish(status=Run.State.SUCCEEDED), 5)
    assert sink.writes == [([1, 2], Run.Status.SUCCEEDED)]


class BadRunSink(SlowSink):
    """Fails every write that holds a run in node ``bad`` (its row is bad), alone or not."""

    def __init__(self) -> None:
        super().__init__(0)
        self.bad_attempts = 0

    async def aprogress(self, batches: list[Any], *, now: Any) -> list[dict[str, Any]]:
        if any(node == "bad" for _, _, node in batches):
            self.bad_attempts += 1
            raise ValueError("a bad row")
        return await super().aprogress(batches, now=now)


async def test_a_run_that_keeps_failing_costs_the_runs_written_with_it_no_events(
        sent, monkeypatch):
    """The run-by-run writes after a failed write of several runs: one run failing for
    the last time must not lose the rows already taken from the runs after it (they
    were in no buffer any more, and never written)."""
    monkeypatch.setattr(WriteBehind, "RETRY_PAUSE", 0.05)
    sink = BadRunSink()
    behind = WriteBehind(sink, interval=0)  # type: ignore[arg-type]
    bad = _writer(None, 0, behind=behind)
    bad.current_node = "bad"
    bad.add({"kind": "run_started"})
    bad.flush_behind()
    # every retry of its own but the last has failed; the last waits out its pause …
    await until(lambda: sink.bad_attempts == WriteBehind.RETRIES)
    goods = [_writer(None, 0, behind=behind) for _ in range(2)]
    for good in goods:  # … and takes these runs along: together, then one by one
        good.add({"kind": "run_started"})
        good.flush_behind()
    await until(lambda: sink.bad_attempts == WriteBehind.RETRIES + 2)
    await until(lambda: len(sink.writes) == 2)
    assert sink.writes == [([1], None), ([1], None)]  # each good run's own write
    assert {m["run_id"] for _, m in sent if m["type"] == "run.events"} == {
        str(good.run.id) for good in goods}
    assert [r["seq"] for r in bad.buffer] == [1]  # left to its final write
