"""Followers' quiet-spell looks: read together, one query for every run asked meanwhile."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from dashboard.models import Run
from dashboard.runs import follow
from dashboard.runs.doorbells import run_group

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


def counted_looks(monkeypatch) -> list[list[str]]:
    """The runs of each quiet-spell look query (:func:`follow._acursors`), as they come."""
    looks: list[list[str]] = []
    read = follow._acursors

    async def counted(run_ids: list[str]) -> dict[str, tuple[int, str]]:
        looks.append(sorted(run_ids))
        return await read(run_ids)

    monkeypatch.setattr(follow, "_acursors", counted)
    return looks


def test_the_looks_of_many_followers_are_one_query(monkeypatch):
    runs = [Run.objects.create(graph="test.echo", thread_id=f"look-{n}:planner", last_seq=n,
                               state=Run.State.RUNNING) for n in range(5)]
    gone = str(uuid.uuid4())  # a run deleted meanwhile: its followers hear None
    reads = counted_looks(monkeypatch)

    async def scenario() -> list[tuple[int, str] | None]:
        # two followers of each run (a page and an SDK stream), all quiet at once
        asked = [str(r.id) for r in runs for _ in range(2)] + [gone]
        return await asyncio.gather(*(follow.acursor(run_id) for run_id in asked))

    seen = async_to_sync(scenario)()
    assert seen == [(n, "running") for n in range(5) for _ in range(2)] + [None]
    assert reads == [sorted([str(r.id) for r in runs] + [gone])]  # one query for all


@pytest.mark.parametrize("backend", [
    "channels_redis.pubsub.RedisPubSubChannelLayer",  # the scale-out default
    "channels_redis.core.RedisChannelLayer",
    "dashboard.runs.layers.InProcessChannelLayer",  # the embedded default
])
def test_a_doorbell_that_rang_while_its_follower_looked_elsewhere_is_heard(
        settings, redis_url, backend):
    """A follower's wait times out (a quiet spell), it looks at the log, and meanwhile the
    run's doorbell rings: the ring is heard at the next wait, not lost until a later look."""
    from channels.layers import channel_layers

    config = {"hosts": [redis_url]} if "redis" in backend else {}
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": backend, "CONFIG": config}}
    channel_layers.backends.clear()
    run_id = uuid.uuid4()

    async def scenario() -> tuple[Any, Any]:
        doorbell = follow.Doorbell(run_id)
        await doorbell.aopen()
        try:
            quiet = await doorbell.await_ring(0.05)  # nothing yet: the follower looks
            await doorbell.layer.group_send(run_group(run_id), {"type": "run.changed"})
            await asyncio.sleep(0.2)  # the ring has arrived before the follower waits again
            return quiet, await doorbell.await_ring(2.0)
        finally:
            await doorbell.aclose()
            await doorbell.layer.flush()

    try:
        quiet, heard = async_to_sync(scenario)()
    finally:
        channel_layers.backends.clear()
    assert quiet is None
    assert heard == {"type": "run.changed"}


def _held(layer: Any) -> dict[str, Any]:
    """What ``layer`` holds for its channels and groups in this process (on this loop)."""
    here = layer._get_layer() if hasattr(layer, "_get_layer") else layer
    held = {"channels": dict(getattr(here, "channels", {})),
            "groups": dict(getattr(here, "groups", {})),
            "buffered": dict(getattr(here, "receive_buffer", {}))}
    for shard in getattr(here, "_shards", []):  # Redis pub/sub: its subscriptions
        held.setdefault("subscribed", set()).update(shard._subscribed_to)
    return held


LAYERS = [
    "channels_redis.pubsub.RedisPubSubChannelLayer",  # the scale-out default
    "channels_redis.core.RedisChannelLayer",
    "dashboard.runs.layers.InProcessChannelLayer",  # the embedded default
]


@pytest.fixture
def layer_backend(request, settings):
    """The default channel layer set to ``request.param`` for the test (Redis: a real
    server's)."""
    from channels.layers import channel_layers

    backend = request.param
    config = ({"hosts": [request.getfixturevalue("redis_url")]} if "redis" in backend
              else {})
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": backend, "CONFIG": config}}
    channel_layers.backends.clear()
    yield backend
    channel_layers.backends.clear()


@pytest.mark.parametrize("layer_backend", LAYERS, indirect=True)
def test_a_doorbell_closed_between_two_rings_leaves_nothing_on_its_layer(layer_backend):
    """A follower that stops right after a doorbell (the run's last, or a client that
    closed its stream while a part was on its way) has no receive pending: its channel,
    its queue with the rings that came meanwhile and (Redis) its subscription go with it
    all the same. (They stayed for the life of the process: 300 SSE streams left 170
    channels subscribed in a daphne, and more with every round.)"""
    run_id = uuid.uuid4()

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        doorbell = follow.Doorbell(run_id)
        layer = doorbell.layer
        before = _held(layer)
        await doorbell.aopen()
        try:
            await layer.group_send(run_group(run_id), {"type": "run.changed", "n": 1})
            heard = await doorbell.await_ring(2.0)  # heard: no receive pending after it
            assert heard == {"type": "run.changed", "n": 1}
            await layer.group_send(run_group(run_id), {"type": "run.changed", "n": 2})
            await asyncio.sleep(0.2)  # it arrived, and waits for a receive that never comes
            during = _held(layer)
        finally:
            await doorbell.aclose()
        after = _held(layer)
        await layer.flush()
        return before, during, after

    before, during, after = async_to_sync(scenario)()
    if layer_backend != "channels_redis.core.RedisChannelLayer":  # (it buffers on receive)
        assert during["channels"], during  # the scenario holds what it should drop
    assert after == before, after


@pytest.mark.parametrize("layer_backend", LAYERS[::2], indirect=True)
def test_a_follower_that_a_runs_last_doorbell_ends_leaves_nothing_on_its_layer(
        layer_backend):
    """The common end of a stream: the doorbell says the run stopped, the follower reads
    the log, gives its last step and returns, between two receives."""
    run = Run.objects.create(graph="test.echo", thread_id="leak:planner",
                             state=Run.State.RUNNING)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], list[follow.Step]]:
        layer = follow.get_channel_layer()
        before = _held(layer)
        steps = []
        async for step in follow.follow(run.id, 0, wake_every=30):
            steps.append(step)
            if len(steps) == 1:  # the first read: the run stops, and its doorbell rings
                await follow.short(Run.objects.filter(id=run.id).update)(
                    state=Run.State.SUCCEEDED)
                await layer.group_send(run_group(run.id), {
                    "type": "run.changed", "run": {"id": str(run.id), "status": "succeeded",
                                                   "last_seq": 0}})
        after = _held(layer)
        await layer.flush()
        return before, after, steps

    before, after, steps = async_to_sync(scenario)()
    assert [step.last for step in steps] == [False, True]
    assert after == before, after


def test_a_follower_given_the_run_as_written_reads_it_again_only_if_it_moved(monkeypatch):
    """A stream of a run its request just wrote starts from that row (one look at its last
    seq and status, with the other followers'), not from a read of the run and its log;
    a run that moved meanwhile is read."""
    reads: list[str] = []
    read = follow.aread

    async def counted(runs: Any, run_id: Any, after: int) -> Any:
        reads.append(str(run_id))
        return await read(runs, run_id, after)

    monkeypatch.setattr(follow, "aread", counted)
    still, moved = (Run.objects.create(graph="test.echo", thread_id=f"known-{n}:planner")
                    for n in range(2))
    Run.objects.filter(id=moved.id).update(state=Run.State.RUNNING, last_seq=1)

    async def first_step(run: Run) -> follow.Step:
        steps = follow.follow(run.id, 0, written=run)
        try:
            return await anext(steps)
        finally:
            await steps.aclose()

    step = async_to_sync(first_step)(still)
    assert step.run is still and step.events == [] and not step.last
    assert reads == []
    step = async_to_sync(first_step)(moved)
    assert step.run is not moved and step.run.status == "running"
    assert reads == [str(moved.id)]


def test_quiet_followers_look_together_on_a_shared_clock(monkeypatch):
    """Followers whose runs went quiet at different moments look at the log at the same
    moments (a quarter of a wake apart at most), so their looks are one query: each on its
    own clock, 200 quiet streams asked ~100 queries a second of a web process."""
    runs = [Run.objects.create(graph="test.echo", thread_id=f"grid-{n}:planner",
                               state=Run.State.RUNNING) for n in range(5)]
    looks = counted_looks(monkeypatch)

    async def one(run: Run, delay: float) -> None:
        await asyncio.sleep(delay)
        async for _ in follow.follow(run.id, 0, wake_every=0.8):
            pass

    async def scenario() -> None:
        # their first reads 25 ms apart: each one's first look would be 25 ms after the last's
        followers = [asyncio.ensure_future(one(run, 0.025 * n)) for n, run in enumerate(runs)]
        await asyncio.sleep(1.5)  # every first look (0.8-1.2 s after its read), no second
        for task in followers:
            task.cancel()
        await asyncio.gather(*followers, return_exceptions=True)

    async_to_sync(scenario)()
    assert sorted(r for batch in looks for r in batch) == sorted(str(r.id) for r in runs)
    assert len(looks) <= 2, looks  # one moment, or two when a quarter's edge fell between


def test_a_look_lands_a_wake_to_a_wake_and_a_quarter_after_the_last_doorbell():
    for now in (0.0, 0.01, 0.249, 0.25, 0.26, 17.3, 12345.678):
        at = follow._look_at(now, 1.0)
        assert 1.0 <= at - now < 1.25 + 1e-9, (now, at)
        assert abs(at * 4 - round(at * 4)) < 1e-9, at  # on the quarter grid


def test_a_follower_told_its_runs_status_by_a_doorbell_does_not_read_the_run_again(
        monkeypatch):
    """A stream starts from its new run as written (queued); the worker's first events come
    with the run's summary (running). The follower's next quiet look finds the run running
    with no event it has not had: nothing to read. (It compared with the status it had
    read, queued, and read the run and its log again: a read a stream under 200 in flight.)"""
    from dashboard.runs import doorbells

    run = Run.objects.create(graph="test.echo", thread_id="told:planner")
    reads: list[int] = []
    read = follow.aread

    async def counted(runs: Any, run_id: Any, after: int) -> Any:
        reads.append(after)
        return await read(runs, run_id, after)

    monkeypatch.setattr(follow, "aread", counted)
    event = {"seq": 1, "kind": "node_started", "node": "a", "namespace": "", "step": 1,
             "task_id": "", "checkpoint_id": "", "payload": {}, "duration_ms": None,
             "created_at": None, "at": None}

    async def scenario() -> list[follow.Step]:
        steps: list[follow.Step] = []
        follower = follow.follow(run.id, 0, written=run, wake_every=0.3)
        try:
            steps.append(await anext(follower))  # the run as written: queued
            await follow.short(Run.objects.filter(id=run.id).update)(
                state=Run.State.RUNNING, last_seq=1)
            summary = {"id": str(run.id), "status": "running", "last_seq": 1}
            await doorbells.abroadcast_events(run.id, [event], run=summary)
            steps.append(await anext(follower))  # the event, with the run's summary
            nxt = asyncio.ensure_future(anext(follower))
            await asyncio.sleep(0.8)  # two quiet looks: running, seq 1, as told
            nxt.cancel()
            await asyncio.gather(nxt, return_exceptions=True)
        finally:
            await follower.aclose()
        return steps

    steps = async_to_sync(scenario)()
    assert steps[0].run is run and steps[1].events[0]["seq"] == 1
    assert steps[1].summary["status"] == "running"
    assert reads == []  # no read: not at the start (as written), not at the looks
