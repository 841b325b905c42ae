"""Many open streams: 200 at once need no more database connections than a few, and past
the limits of a user or a process the next stream (or queued run) is refused with 429."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.db import connection

from dashboard.models import Run
from tests.conftest import ARTIFACTS, SERVED, api_token, served
from tests.lgserver.conftest import PERMS
from tests.support.lgserver import async_sdk_client

# Beside the suite's other live daphnes (whose pools tests.conftest.SMALL_POOLS caps: with
# the defaults their pools together passed PostgreSQL's max_connections, 100).
pytestmark = [pytest.mark.long, pytest.mark.slow, pytest.mark.pg, pytest.mark.server,
              pytest.mark.django_db(transaction=True)]


@pytest.fixture
def user(django_user_model):
    user = django_user_model.objects.create_user(username="many", password="pw-many-12345")
    user.user_permissions.set(Permission.objects.filter(codename__in=PERMS))
    return user


@pytest.fixture(scope="module")
def many_url(django_db_setup, django_db_blocker, langgraph_json):
    """A daphne of its own, with default settings (its memory is measured)."""
    with served(django_db_blocker, PLANWATCH_LANGGRAPH_CONFIG=str(langgraph_json),
                PLANWATCH_THINK_TIME="0.01") as url:
        yield url


def rss_mb(url: str) -> float:
    """The resident memory of the daphne serving ``url`` (MB), from /proc."""
    status = Path(f"/proc/{SERVED[url].pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


async def stream_all(url: str, key: str, count: int, limit: int) -> list[list]:
    """``count`` runs of the ``slow`` graph streamed at once; each stream's parts."""
    sdk = async_sdk_client(f"{url}/langgraph", key)

    async def one() -> list:
        thread = await sdk.threads.create()
        return [(part.event, part.data) async for part in sdk.runs.stream(
            thread["thread_id"], "slow", input={"limit": limit},
            stream_mode=["values", "updates"])]

    try:
        return await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True)
    finally:
        await sdk.http.client.aclose()


def test_200_streams_at_once_finish_with_no_error_and_no_pool_timeout(many_url, user):
    if connection.vendor != "postgresql":
        pytest.skip("Django's psycopg pool: this runs in the PostgreSQL pass")
    log = ARTIFACTS / f"daphne-{many_url.rsplit(':', 1)[1]}.log"
    results = asyncio.run(stream_all(many_url, api_token(user), 200, 3))
    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, failures[:3]
    for parts in results:
        assert [e for e, _ in parts if e == "error"] == []
        assert [d for e, d in parts if e == "values"][-1]["count"] == 3  # every run ended
    text = log.read_text()
    assert "PoolTimeout" not in text and "couldn't get a connection" not in text


def test_memory_does_not_grow_with_streams_that_closed(many_url, user):
    # (300 clients connecting at once overflowed daphne's listen queue while it was
    # Twisted's default, 50: a stream's read failed with httpx ReadError now and then)
    key = api_token(user)
    # SQLite has one writer: 300 runs created at once (each request's decision holds the
    # write lock ~30 ms under this load, beside the executor's writes of 300 runs) queue
    # past its 30 s busy timeout and get 503 + Retry-After; 100 at once fit its queue.
    # PostgreSQL takes the 300.
    if connection.vendor == "postgresql":  # CI time: 99 s there; the pools: the test above
        pytest.skip("a daphne's memory: measured in the first pass (SQLite, 100 streams)")
    count = 100
    asyncio.run(stream_all(many_url, key, 20, 2))  # warm up: imports, pools, templates
    baseline = rss_mb(many_url)
    rounds = []
    for _ in range(2):
        results = asyncio.run(stream_all(many_url, key, count, 2))
        assert not [r for r in results if isinstance(r, BaseException)]
        rounds.append(rss_mb(many_url))
    print(f"daphne RSS: baseline {baseline:.0f} MB, after {count} streams {rounds[0]:.0f} MB, "
          f"after {count} more {rounds[1]:.0f} MB")
    # measured before: 623 MB -> 1,026 MB, kept after the streams closed and growing with
    # each round; now what 300 streams (and their 300 runs at once) take is reused
    assert rounds[1] <= rounds[0] * 1.10 + 10, (baseline, rounds)
    assert rounds[1] <= baseline * 2, (baseline, rounds)


def redis_subscriptions(pid: int, redis_url: str) -> int:
    """How many Redis channels the process ``pid`` is subscribed to: the ``sub`` counts
    that Redis's ``CLIENT LIST`` gives the connections whose port is one of that process's
    sockets (other processes, the suite's other daphnes, share the server)."""
    import redis

    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # (closed meanwhile)
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    with redis.Redis.from_url(redis_url) as client:
        return sum(int(c["sub"]) for c in client.client_list()
                   if int(str(c["addr"]).rsplit(":", 1)[1]) in ports)


async def stream_or_leave(url: str, key: str, count: int, limit: int, leave: int
                          ) -> list[str | BaseException]:
    """``count`` runs of the ``slow`` graph streamed at once: half read to their end
    ("read", or "error" for a stream that ended with an error part), the other half closed
    by their client after ``leave`` parts ("left"; their runs go on). A run request
    answered 503 (the database busy: 300 at once wait for the web's pool) is sent again
    after its ``Retry-After``, as it says."""
    from langgraph_sdk.errors import APIStatusError

    sdk = async_sdk_client(f"{url}/langgraph", key)

    async def one(index: int) -> str:
        thread = await sdk.threads.create()
        for _ in range(30):
            parts = sdk.runs.stream(thread["thread_id"], "slow", input={"limit": limit},
                                    stream_mode=["values", "updates"])
            seen = []
            try:
                async with contextlib.aclosing(parts):
                    async for part in parts:
                        seen.append(part.event)
                        if index % 2 and len(seen) >= leave:
                            return "left"
            except APIStatusError as exc:
                if exc.status_code != 503 or seen:
                    raise
                await asyncio.sleep(float(exc.response.headers.get("Retry-After", "5")))
                continue
            return "error" if "error" in seen else "read"
        raise AssertionError("30 run requests answered 503")

    async def bounded(index: int) -> str:
        # a run left running (seen: a deadlocked batch write of the executor) keeps its
        # stream open with heartbeats: that stream is closed and counted apart
        try:
            return await asyncio.wait_for(one(index), 300)
        except TimeoutError:
            return "timed out"

    try:
        return await asyncio.gather(*(bounded(i) for i in range(count)),
                                    return_exceptions=True)
    finally:
        await sdk.http.client.aclose()


def runs_ended() -> int:
    """Wait until no run executes (those whose clients left go on to their end), 120 s at
    most; how many still do."""
    deadline = time.monotonic() + 120
    while Run.objects.busy().exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    return Run.objects.busy().count()


def test_streams_closed_leave_no_doorbell_subscribed_and_no_memory_behind(
        many_url, user, redis_url):
    """300 SDK streams, three times, half read to their run's end and half closed by their
    client midway: after each round the daphne is subscribed to no more Redis channels
    than before (each stream's doorbell channel is dropped), and its memory after the
    second and third rounds is within 20 MB of the first (the issue's target)."""
    if connection.vendor != "postgresql":
        pytest.skip("Redis's pub/sub layer and 300 streams: the PostgreSQL pass")
    key = api_token(user)
    pid = SERVED[many_url].pid
    asyncio.run(stream_or_leave(many_url, key, 20, 2, 2))  # warm up: imports, pools
    assert runs_ended() == 0
    subscribed = [redis_subscriptions(pid, redis_url)]
    busy = [0]
    rounds = []
    for _ in range(3):
        results = asyncio.run(stream_or_leave(many_url, key, 300, 4, 3))
        assert not [r for r in results if isinstance(r, BaseException)], [
            r for r in results if isinstance(r, BaseException)][:3]
        # (a stream read may fail under this load, "couldn't get a connection": it ends
        # with an error part, and leaves nothing behind either)
        assert results.count("read") >= 100 and results.count("left") >= 100, results
        busy.append(runs_ended())
        time.sleep(2)  # the streams of the last runs close
        subscribed.append(redis_subscriptions(pid, redis_url))
        rounds.append(rss_mb(many_url))
    print(f"daphne RSS after each round of 300 streams: {rounds} MB; Redis channels "
          f"subscribed: {subscribed}; last round: read {results.count('read')}, left "
          f"{results.count('left')}, error {results.count('error')}")
    # before: every stream whose follower stopped between two doorbells (the run's last,
    # or a client gone while a part was on its way) left its channel subscribed for good
    # (a run still busy may hold its executor's subscriptions: two at most, it and its group)
    assert all(subs <= subscribed[0] + 2 * stuck for subs, stuck in zip(subscribed, busy,
                                                                       strict=True)), (
        subscribed, busy)
    assert max(rounds[1:]) <= rounds[0] + 20, rounds


def test_the_server_queues_a_thousand_connections_before_it_accepts_them(many_url):
    """Two hundred clients that connect at once must not overflow the listening socket's
    queue (Twisted's default is 50; the kernel drops the handshakes past it)."""
    import shutil
    import subprocess

    from dashboard.management.commands.serve import BACKLOG

    if not shutil.which("ss"):
        pytest.skip("iproute2's ss is not installed")
    port = many_url.rsplit(":", 1)[1]
    listening = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True,
                               text=True, check=True).stdout.split()
    assert listening[0] == "LISTEN" and int(listening[2]) == BACKLOG >= 1000, listening
