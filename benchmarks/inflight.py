"""Many runs in flight: model-bound runs streamed to their clients, Planwatch beside its peers.

Every server hosts the same 4-node loop (:mod:`benchmarks.loop_graph`, 20 nodes a run,
each awaiting ``BENCH_NODE_SECONDS``) from a ``langgraph.json`` under
``benchmarks/inflight/`` and is driven by the official ``langgraph-sdk`` (``runs.stream``,
modes custom + updates) on an httpx transport with large ``Limits`` (httpx's default 100
connections would measure the client's queue). Every server runs with its default
settings; LangGraph's ``--n-jobs-per-worker`` is the concurrency. Planwatch runs scale-out
(daphne, one procrastinate worker, PostgreSQL, Redis) as ``make bench`` measures it.

``python -m benchmarks.inflight start`` measures how soon a run starts when slots are free
(request → its first node's ``node_started`` row), in-process on SQLite and scale-out, with
other runs in flight. ``python -m benchmarks.inflight figure [--quick]`` measures the
figure (``--quick``: 10 in flight, 20 runs, 100 ms nodes, a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import loop_graph, peers
from benchmarks.common import VAR, free_port, percentile, process
from benchmarks.peers_planwatch import Starter

CONFIG_DIR = Path(__file__).resolve().parent / "inflight"
PG_DB = "planwatch_bench_inflight"
SQLITE_DB = VAR / "planwatch_bench_inflight.sqlite3"
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9")
USERNAME = "bench-inflight"


# -- the client -----------------------------------------------------------------------------


def sdk_client(url: str, api_key: str | None = None) -> Any:
    """The official async client on a transport that holds thousands of connections."""
    import httpx
    from langgraph_sdk.client import LangGraphClient

    headers = {"x-api-key": api_key} if api_key else {}
    http = httpx.AsyncClient(
        base_url=url, headers=headers,
        limits=httpx.Limits(max_connections=5000, max_keepalive_connections=5000),
        timeout=httpx.Timeout(connect=60, read=600, write=60, pool=600))
    return LangGraphClient(http)


# -- Planwatch, served with its defaults ----------------------------------------------------


@dataclass
class Served:
    """A server under test: its SDK base URL, API key and processes (name → pid)."""

    url: str
    api_key: str | None = None
    pids: dict[str, int] = field(default_factory=dict)
    starter: Starter | None = None
    """Planwatch only: a Django process reading the runs' own records."""


def planwatch_env(mode: str) -> dict[str, str]:
    """Environment of Planwatch's processes: ``inprocess`` (SQLite, runs inside daphne)
    or ``scaleout`` (PostgreSQL, Redis, procrastinate workers); otherwise its defaults."""
    env = {
        **os.environ, **peers.OFFLINE,
        "PLANWATCH_VAR_DIR": str(VAR / "inflight"),
        "PLANWATCH_LANGGRAPH_CONFIG": str(CONFIG_DIR / "langgraph.json"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PROCRASTINATE_LOG_LEVEL": "WARNING",
        "BENCH_USER": USERNAME,
        "BENCH_PASSWORD": "bench-" + os.urandom(8).hex(),
        "BENCH_GRAPH": loop_graph.NAME,
    }
    for name in ("DATABASE_URL", "REDIS_URL", "PLANWATCH_EXECUTOR",
                 "PLANWATCH_MAX_CONCURRENT_RUNS", "DB_POOL_MAX_SIZE"):
        env.pop(name, None)
    if mode == "scaleout":
        env.update(DATABASE_URL=f"{peers.PG_SERVER}/{PG_DB}", REDIS_URL=REDIS_URL,
                   PLANWATCH_EXECUTOR="procrastinate")
    elif mode == "inprocess":
        env["DATABASE_URL"] = f"sqlite:///{SQLITE_DB}"
    else:
        raise ValueError(f"unknown mode {mode!r}; use 'inprocess' or 'scaleout'")
    return env


@contextmanager
def planwatch_server(mode: str) -> Iterator[Served]:
    """Planwatch on a fresh database of its own, with default settings."""
    env = planwatch_env(mode)
    if mode == "scaleout":
        peers.recreate_database(PG_DB)
    else:
        SQLITE_DB.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{SQLITE_DB}{suffix}").unlink(missing_ok=True)
    migrated = subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v0"],
                              cwd=peers.ROOT, env=env, capture_output=True, text=True)
    if migrated.returncode:
        raise RuntimeError(f"migrate failed:\n{migrated.stderr[-3000:]}")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with ExitStack() as stack:
        web = stack.enter_context(process(
            [sys.executable, "manage.py", "serve", "--port", str(port)], env=env,
            log=f"inflight/planwatch-{mode}-daphne.log",
            ready=peers.http_ok(f"{base}/accounts/login/")))
        pids = {"web": web.pid}
        if mode == "scaleout":
            worker = stack.enter_context(process(
                [sys.executable, "manage.py", "planwatch_worker"], env=env,
                log=f"inflight/planwatch-{mode}-worker.log"))
            pids["worker"] = worker.pid
        starter = Starter(env)
        stack.callback(starter.close)
        yield Served(f"{base}/langgraph", starter.ask("token"), pids, starter)


# -- runs ------------------------------------------------------------------------------------


@dataclass
class Streamed:
    """One run as its client saw it."""

    run_id: str = ""
    asked: float = 0.0
    first_event_ms: float = float("nan")
    latencies: list[float] = field(default_factory=list)
    """Each event's receive time minus the completion time its node stamped (ms)."""
    error: str = ""


async def astream_run(client: Any) -> Streamed:
    """Start one run of the loop on a new thread and stream it (custom + updates)."""
    seen = Streamed()
    try:
        thread = await client.threads.create()
        seen.asked = time.time()
        async for part in client.runs.stream(thread["thread_id"], loop_graph.NAME, input={},
                                             stream_mode=["custom", "updates"]):
            now = time.time()
            data = part.data
            if part.event == "metadata" and isinstance(data, dict):
                seen.run_id = str(data.get("run_id", ""))
            elif part.event == "error":
                seen.error = f"error part: {str(data)[:200]}"
            elif part.event.startswith(("custom", "updates")) and isinstance(data, dict):
                stamps = [data["t"]] if "t" in data else [
                    v["t"] for v in data.values() if isinstance(v, dict) and "t" in v]
                if stamps and not seen.latencies:
                    seen.first_event_ms = (now - seen.asked) * 1000
                seen.latencies.extend((now - t) * 1000 for t in stamps)
        expected = 2 * len(loop_graph.NODES) * loop_graph.ITERATIONS
        if not seen.error and len(seen.latencies) != expected:
            seen.error = f"saw {len(seen.latencies)} events, expected {expected}"
    except Exception as exc:  # counted and reported: the other runs still count
        seen.error = f"{type(exc).__name__}: {exc}"[:300]
    return seen


# -- how soon a run starts ---------------------------------------------------------------------


async def astart_latency(served: Served, *, probes: int, load: int, gap: float
                         ) -> dict[str, Any]:
    """``probes`` runs created one every ``gap`` s while ``load`` streamed runs are in
    flight: p50/p99 from each request to its run row, its claim, its first node's
    ``node_started`` row, and its first ``node_finished`` row less the node's own time."""
    client = sdk_client(served.url, served.api_key)
    stop = asyncio.Event()

    async def keep_busy() -> None:
        while not stop.is_set():
            await astream_run(client)

    background = [asyncio.ensure_future(keep_busy()) for _ in range(load)]
    await asyncio.sleep(2 * loop_graph.node_seconds() + 1)  # the load is in flight
    starts: list[tuple[str, float]] = []
    for _ in range(probes):
        thread = await client.threads.create()
        asked = time.time()
        run = await client.runs.create(thread["thread_id"], loop_graph.NAME, input={})
        starts.append((run["run_id"], asked))
        await asyncio.sleep(gap)
    await asyncio.sleep(loop_graph.node_seconds() + 1)  # the last probe's first node ended
    stop.set()
    for task in background:
        task.cancel()
    await asyncio.gather(*background, return_exceptions=True)
    await client.http.client.aclose()
    assert served.starter is not None
    moments = json.loads(await served.starter.aask(
        "moments " + ",".join(run_id for run_id, _ in starts)))
    phases: dict[str, list[float]] = {"run_row": [], "claimed": [], "first_node_started": [],
                                      "first_node_finished_less_node": []}
    node_ms = loop_graph.node_seconds() * 1000
    for run_id, asked in starts:
        stored, claimed, finished, started = moments.get(run_id, [None] * 4)
        for name, moment, less in (("run_row", stored, 0.0), ("claimed", claimed, 0.0),
                                   ("first_node_started", started, 0.0),
                                   ("first_node_finished_less_node", finished, node_ms)):
            if moment is not None:
                phases[name].append((moment - asked) * 1000 - less)
    return {"probes": probes, "load_in_flight": load, "node_seconds": loop_graph.node_seconds(),
            "missing": probes - len(phases["first_node_started"]),
            **{f"{name}_{q}_ms": round(percentile(values, n), 1)
               for name, values in phases.items()
               for q, n in (("p50", 50), ("p99", 99), ("max", 100))}}


def measure_start(*, modes: tuple[str, ...], probes: int, load: int, gap: float
                  ) -> dict[str, Any]:
    """How soon runs start with free slots, in each mode (see :func:`astart_latency`)."""
    out: dict[str, Any] = {}
    for mode in modes:
        with planwatch_server(mode) as served:
            out[mode] = asyncio.run(astart_latency(served, probes=probes, load=load, gap=gap))
    return out


def main() -> None:
    """Parse arguments, measure, print JSON (the last line)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    start = sub.add_parser("start", help="request → first node start, with free slots")
    start.add_argument("--mode", action="append", choices=("inprocess", "scaleout"))
    start.add_argument("--probes", type=int, default=40)
    start.add_argument("--load", type=int, default=20)
    start.add_argument("--gap", type=float, default=0.25)
    args = parser.parse_args()
    if args.what == "start":
        result = measure_start(modes=tuple(args.mode or ("inprocess", "scaleout")),
                               probes=args.probes, load=args.load, gap=args.gap)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
