"""Against the peers: one 80-node graph hosted by Planwatch, LangGraph's API server and Aegra.

Each system runs the chain of :mod:`benchmarks.peer_graph` and is watched through its own
live stream: the peers through their SSE with the official ``langgraph-sdk``
(``stream_mode="updates"``), Planwatch through its websocket ``/ws/runs/<id>/?after=0``
(daphne, PostgreSQL, Redis, a procrastinate worker executing the runs). A node stamps its
completion time; the latency of a node is the client's receive time minus that stamp
(same machine clock). Runs/s counts runs from start to the watcher seeing the last node,
one at a time and ``CONCURRENCY`` at once.

The peers live in their own venv ``.venv-peers`` (pinned below, created on first use) and
run offline: ``langgraph dev --no-browser`` (in-memory runtime, no license needed) and
``aegra-api`` under uvicorn on PostgreSQL database ``aegra_bench``.
``python -m benchmarks.peers [--runs N] [--only NAME]`` prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks import peer_graph
from benchmarks.common import free_port, percentile, process

ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = ROOT / "benchmarks" / "peers"
VAR = ROOT / "var" / "bench" / "peers"
VENV = ROOT / ".venv-peers"
PG_SERVER = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")
CONCURRENCY = 10
WARMUP = 2
PINS = (
    "langgraph==1.2.22",
    "langgraph-api==0.16.7",
    "langgraph-runtime-inmem==0.36.7",
    "langgraph-cli[inmem]==0.4.40",
    "langgraph-sdk==0.4.14",
    "aegra-api==0.11.0",
)
OFFLINE = {
    # no analytics, tracing or telemetry leaves the machine
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_API_KEY": "",
    "LANGCHAIN_API_KEY": "",
    "DO_NOT_TRACK": "1",
    "OTEL_SDK_DISABLED": "true",
    "LOG_LEVEL": "WARNING",
    "PYTHONUNBUFFERED": "1",
}

Latencies = list[float]
Resolved = tuple[Latencies, dict[str, float]]
"""A phase's node latencies (ms) and a system's own break-down of them."""


# -- statistics and processes ------------------------------------------------------------


def http_ok(url: str) -> Callable[[], bool]:
    """A readiness probe: ``url`` answers 200."""
    import requests

    def probe() -> bool:
        try:
            return requests.get(url, timeout=1).status_code == 200
        except requests.RequestException:
            return False

    return probe


def recreate_database(name: str) -> None:
    """Drop and create a PostgreSQL database of the bench's own."""
    for sql in (f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"CREATE DATABASE {name}"):
        subprocess.run(["psql", f"{PG_SERVER}/postgres", "-qc", sql], check=True,
                       capture_output=True)


# -- the peers' venv -----------------------------------------------------------------------


def ensure_peers_venv() -> Path:
    """Create ``.venv-peers`` with the pinned peer packages unless it already has them."""
    python = VENV / "bin" / "python"
    marker = VENV / "planwatch-pins.txt"
    wanted = "\n".join(PINS)
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    base = shutil.which("python3.12") or shutil.which("python3.13") or sys.executable
    subprocess.run([base, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *PINS], check=True)
    marker.write_text(wanted)
    return python


def peer_versions() -> dict[str, str]:
    """Installed versions of the peer packages (as pip reports them in .venv-peers)."""
    names = ["langgraph", "langgraph-api", "langgraph-runtime-inmem", "langgraph-cli",
             "langgraph-sdk", "langgraph-checkpoint-postgres", "aegra-api"]
    code = ("import json,importlib.metadata as m;"
            f"print(json.dumps({{n: m.version(n) for n in {names!r}}}))")
    done = subprocess.run([str(VENV / "bin" / "python"), "-c", code], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


# -- the peers' servers --------------------------------------------------------------------


@contextmanager
def langgraph_api_server(*, config_dir: Path = CONFIG_DIR, jobs: int = CONCURRENCY,
                         env: dict[str, str] | None = None,
                         pids: dict[str, int] | None = None) -> Iterator[str]:
    """``langgraph dev`` (in-memory runtime) serving ``config_dir``'s langgraph.json (the
    chain as assistant ``chain80`` by default), ``jobs`` runs at once; its pid goes into
    ``pids["web"]``."""
    port = free_port()
    # it resolves the graph's path from its working directory and persists its in-memory
    # runtime under .langgraph_api/ there (ignored by git): start each time from nothing
    shutil.rmtree(config_dir / ".langgraph_api", ignore_errors=True)
    args = [str(VENV / "bin" / "langgraph"), "dev", "--no-browser", "--no-reload",
            "--host", "127.0.0.1", "--port", str(port),
            "--n-jobs-per-worker", str(jobs), "--server-log-level", "WARNING",
            "--config", str(config_dir / "langgraph.json")]
    url = f"http://127.0.0.1:{port}"
    with process(args, env={**os.environ, **OFFLINE, **(env or {})},
                 log="peers/langgraph-api.log", cwd=config_dir,
                 ready=http_ok(f"{url}/ok")) as proc:
        if pids is not None:
            pids["web"] = proc.pid
        yield url


@contextmanager
def aegra_server(*, config_dir: Path = CONFIG_DIR, env: dict[str, str] | None = None,
                 pids: dict[str, int] | None = None) -> Iterator[str]:
    """Aegra under uvicorn on PostgreSQL database ``aegra_bench`` (migrated at start-up),
    serving ``config_dir``'s aegra.json; its pid goes into ``pids["web"]``."""
    recreate_database("aegra_bench")
    port = free_port()
    environ = {
        **os.environ, **OFFLINE,
        "DATABASE_URL": f"{PG_SERVER}/aegra_bench",
        "AEGRA_CONFIG": str(config_dir / "aegra.json"),
        "AUTH_TYPE": "noop",
        "REDIS_BROKER_ENABLED": "false",
        "OTEL_TARGETS": "",
        **(env or {}),
    }
    args = [str(VENV / "bin" / "uvicorn"), "aegra_api.main:app", "--host", "127.0.0.1",
            "--port", str(port), "--log-level", "warning", "--no-access-log"]
    url = f"http://127.0.0.1:{port}"
    with process(args, env=environ, log="peers/aegra.log", cwd=config_dir,
                 ready=http_ok(f"{url}/health")) as proc:
        if pids is not None:
            pids["web"] = proc.pid
        yield url


Start = tuple[str, float]
"""A run's id (as the server's metadata part named it) and the moment it was asked for."""


async def apeer_run(client: Any) -> tuple[Latencies, float, Start]:
    """Start one run on a new thread and stream its node updates; return their latencies,
    the time from the run's request to its first node update (ms), and the run's start."""
    thread = await client.threads.create()
    latencies: Latencies = []
    asked = time.time()
    first = float("nan")
    run_id = ""
    async for part in client.runs.stream(
        thread["thread_id"], "chain80", input={"i": -1}, stream_mode="updates",
    ):
        now = time.time()
        if part.event == "metadata" and isinstance(part.data, dict):
            run_id = str(part.data.get("run_id", ""))
        elif part.event == "updates" and isinstance(part.data, dict):
            if not latencies:
                first = (now - asked) * 1000
            latencies.extend(
                (now - update["t"]) * 1000 for update in part.data.values()
                if isinstance(update, dict) and "t" in update
            )
        elif part.event == "error":
            raise RuntimeError(f"the peer's run failed: {part.data}")
    if len(latencies) != peer_graph.NODES:
        raise RuntimeError(f"saw {len(latencies)} node updates, expected {peer_graph.NODES}")
    return latencies, first, (run_id, asked)


async def ameasure_bare(*, runs: int, per_run: bool) -> dict[str, dict[str, float]]:
    """The chain compiled with LangGraph's AsyncPostgresSaver, streamed in this process.

    No server, no network between the run and its reader, no event log: the floor of any
    host that keeps LangGraph's checkpoints in PostgreSQL (the saver on a psycopg pool of
    the size Planwatch gives its own, durability "async" as LangGraph and Planwatch
    default to). ``per_run``: each run gets a saver instance of its own on the pool, as
    Planwatch does (one instance serialises every run's checkpoint I/O behind its lock).
    """
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    recreate_database(BARE_DB)
    pool = AsyncConnectionPool(f"{PG_SERVER}/{BARE_DB}", min_size=1, max_size=20, open=False,
                               kwargs={"autocommit": True, "prepare_threshold": 0,
                                       "row_factory": dict_row})
    await pool.open()
    try:
        saver = AsyncPostgresSaver(pool)
        await saver.setup()
        graph = peer_graph.build().compile(checkpointer=saver)

        async def one_run() -> tuple[Latencies, float]:
            config = {"configurable": {"thread_id": str(uuid.uuid4())}}
            latencies: Latencies = []
            run = graph.copy(update={"checkpointer": AsyncPostgresSaver(pool)}) if per_run \
                else graph
            asked, first = time.time(), float("nan")
            async for update in run.astream({"i": -1}, config, stream_mode="updates",
                                            durability="async"):
                now = time.time()
                if not latencies:
                    first = (now - asked) * 1000
                latencies.extend((now - v["t"]) * 1000 for v in update.values()
                                 if isinstance(v, dict) and "t" in v)
            return latencies, first

        return await ameasure_system(one_run, runs=runs, resolve=_flatten)
    finally:
        await pool.close()


# -- phases --------------------------------------------------------------------------------


async def aphase(one_run: Callable[[], Awaitable[Any]], *, runs: int, concurrency: int,
                 ) -> tuple[list[Any], float]:
    """Run ``runs`` runs, ``concurrency`` at a time; return their results and runs/s."""
    remaining = runs
    results: list[Any] = []

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            results.append(await one_run())

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results, runs / (time.perf_counter() - began)


def figure(latencies: Latencies, runs_per_s: float, **extra: float) -> dict[str, float]:
    """One cell of the table (``extra``: a system's own break-down)."""
    return {
        "p50_ms": round(percentile(latencies, 50), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "runs_per_s": round(runs_per_s, 2),
        "nodes": len(latencies),
        **extra,
    }


async def ameasure_system(one_run: Callable[[], Awaitable[Any]], *, runs: int,
                          resolve: Callable[[list[Any]], Awaitable[Resolved]],
                          cpu: Callable[[], dict[str, float]] | None = None,
                          ) -> dict[str, dict[str, float]]:
    """Warm up, then measure sequentially and ``CONCURRENCY`` at once; with ``cpu`` (CPU
    seconds used so far by each of a system's processes), also each process's CPU a run."""
    await aphase(one_run, runs=WARMUP, concurrency=1)
    out = {}
    for label, concurrency in (("sequential", 1), (f"concurrent_{CONCURRENCY}", CONCURRENCY)):
        before = cpu() if cpu else {}
        results, rate = await aphase(one_run, runs=runs, concurrency=concurrency)
        used = {f"cpu_ms_per_run_{name}": round((seconds - before[name]) / runs * 1000, 1)
                for name, seconds in cpu().items()} if cpu else {}
        latencies, extra = await resolve(results)
        out[label] = figure(latencies, rate, **extra, **used)
    return out


async def aphase_paced(one_run: Callable[[], Awaitable[Any]], *, runs: int, rate: float,
                       ) -> tuple[list[Any], float]:
    """Start ``runs`` runs at ``rate`` a second, whatever the earlier ones are doing (an
    open loop, as clients arrive); return their results and the runs/s achieved."""
    began = time.perf_counter()
    tasks = []
    for index in range(runs):
        await asyncio.sleep(max(0.0, began + index / rate - time.perf_counter()))
        tasks.append(asyncio.ensure_future(one_run()))
    results = await asyncio.gather(*tasks)
    return list(results), runs / (time.perf_counter() - began)


async def ameasure_peer(url: str, *, runs: int, api_key: str | None = None,
                        pace: float | None = None,
                        cpu: Callable[[], dict[str, float]] | None = None,
                        phases: Callable[[list[Start]], dict[str, float]] | None = None,
                        ) -> dict[str, dict[str, float]]:
    """Measure one server through the official SDK (for Planwatch: its ``/langgraph``);
    with ``pace``, also with runs started at that rate (the best peer's own); with
    ``phases``, where each phase's runs spent their time to the first update, as the
    server's own records tell."""
    from langgraph_sdk import get_client

    client = get_client(url=url, api_key=api_key)

    async def resolve(results: list[tuple[Latencies, float, Start]]) -> Resolved:
        latencies, extra = await _flatten(results)
        if phases:
            extra |= await asyncio.to_thread(phases, [start for *_, start in results])
        return latencies, extra

    out = await ameasure_system(lambda: apeer_run(client), runs=runs, resolve=resolve,
                                cpu=cpu)
    if pace:
        results, rate = await aphase_paced(lambda: apeer_run(client), runs=runs, rate=pace)
        latencies, extra = await resolve(results)
        out["paced"] = figure(latencies, rate, **extra)
    return out


async def _flatten(results: list[tuple[Any, ...]]) -> Resolved:
    """A phase's node latencies, and its runs' start → first update (each result begins
    with a run's latencies and that time; servers' results also carry the run's start)."""
    firsts = [first for _, first, *_ in results]
    return [lat for run, *_ in results for lat in run], {
        "first_update_p50_ms": round(percentile(firsts, 50), 2),
        "first_update_p99_ms": round(percentile(firsts, 99), 2)}


# -- the figure ----------------------------------------------------------------------------

SYSTEMS = ("planwatch", "langgraph-api", "aegra")
SDK = "planwatch-sdk"  # Planwatch on the peers' terms: the same client, the same graph
BARE = "langgraph-bare"  # not peers: the floor (see ameasure_bare), with one saver …
BARE_PER_RUN = "langgraph-bare-saver-per-run"  # … and with a saver per run
BARE_DB = "langgraph_bare_bench"


def measure(*, runs: int = 30, only: tuple[str, ...] = (*SYSTEMS, SDK, BARE)
            ) -> dict[str, Any]:
    """Every system, sequential and 10 at once: latency p50/p99 (ms) and runs/s."""
    ensure_peers_venv()
    result: dict[str, Any] = {
        "graph": f"chain of {peer_graph.NODES} async nodes", "runs": runs,
        "concurrency": CONCURRENCY, "versions": peer_versions(),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version()},
    }
    # the peers first: Planwatch is then also measured at the best one's own rate
    if "langgraph-api" in only:
        with langgraph_api_server() as url:
            result["langgraph-api"] = asyncio.run(ameasure_peer(url, runs=runs))
    if "aegra" in only:
        with aegra_server() as url:
            result["aegra"] = asyncio.run(ameasure_peer(url, runs=runs))
    if "planwatch" in only or SDK in only:
        from benchmarks import peers_planwatch

        with peers_planwatch.planwatch_server() as server:
            result["planwatch"] = asyncio.run(
                ameasure_system(server.arun, runs=runs, resolve=server.aresolve)
            ) | {"watched_through": server.watched_through}
            if SDK in only:
                best = best_peer(result)
                result[SDK] = asyncio.run(ameasure_peer(
                    f"{server.base_url}/langgraph", runs=runs, api_key=server.api_key,
                    pace=best[1]["runs_per_s"] if best else None, cpu=server.cpu,
                    phases=server.start_phases))
    if BARE in only:
        result[BARE] = asyncio.run(ameasure_bare(runs=runs, per_run=False))
        result[BARE_PER_RUN] = asyncio.run(ameasure_bare(runs=runs, per_run=True))
    result["targets"] = targets(result)
    return result


def best_peer(result: dict[str, Any]) -> tuple[str, dict[str, float]] | None:
    """The peer with the most runs/s at ``CONCURRENCY`` at once, and its cell."""
    key = f"concurrent_{CONCURRENCY}"
    peers = {name: result[name][key] for name in SYSTEMS[1:] if name in result}
    if not peers:
        return None
    name = max(peers, key=lambda n: peers[n]["runs_per_s"])
    return name, peers[name]


def targets(result: dict[str, Any]) -> dict[str, Any]:
    """Issue 22's terms: Planwatch through the peers' own client (its ``/langgraph`` API,
    else its websocket) gives ≥ 2x the best peer's runs/s at ``CONCURRENCY`` at once; at
    that peer's own rate (runs started at its runs/s) its p99 is no worse than that
    peer's (unpaced when no paced phase was measured); its run start → first node update
    p99 is ≤ 20 ms."""
    key = f"concurrent_{CONCURRENCY}"
    best = best_peer(result)
    ours_name = SDK if SDK in result else "planwatch"
    if ours_name not in result or best is None:
        return {}
    best_name, peer = best
    ours = result[ours_name][key]
    at_rate = result[ours_name].get("paced")
    out = {
        "latency": {"system": ours_name,
                    "planwatch_p99_ms": (at_rate or ours)["p99_ms"],
                    "paced_runs_per_s": at_rate["runs_per_s"] if at_rate else None,
                    "best_peer": best_name, "best_peer_p99_ms": peer["p99_ms"],
                    "met": (at_rate or ours)["p99_ms"] <= peer["p99_ms"]},
        "throughput": {"system": ours_name, "planwatch_runs_per_s": ours["runs_per_s"],
                       "best_peer": best_name, "best_peer_runs_per_s": peer["runs_per_s"],
                       "ratio": round(ours["runs_per_s"] / peer["runs_per_s"], 2),
                       "met": ours["runs_per_s"] >= 2 * peer["runs_per_s"]},
    }
    if "first_update_p99_ms" in ours:
        out["first_update"] = {
            "system": ours_name, "planwatch_p99_ms": ours["first_update_p99_ms"],
            "best_peer": best_name, "best_peer_p99_ms": peer.get("first_update_p99_ms"),
            "met": ours["first_update_p99_ms"] <= 20,
            # where the time went (p50 from the request), one at a time and 10 at once
            "phases": {mode: {k: v for k, v in cell.items()
                              if k.startswith("start_") or k == "first_update_p50_ms"}
                       for mode, cell in result[ours_name].items()
                       if isinstance(cell, dict) and "start_run_row_p50_ms" in cell}}
    return out


def table(result: dict[str, Any]) -> str:
    """The figure as a Markdown table, then the targets."""
    lines = ["| system | mode | p50 ms | p99 ms | runs/s | nodes | more |",
             "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    shown = ("p50_ms", "p99_ms", "runs_per_s", "nodes")
    for name in (SDK, *SYSTEMS, BARE, BARE_PER_RUN):
        for mode, cell in (result.get(name) or {}).items():
            if isinstance(cell, dict):
                more = ", ".join(f"{k} {v}" for k, v in cell.items() if k not in shown)
                lines.append(f"| {name} | {mode} | {cell['p50_ms']} | {cell['p99_ms']} | "
                             f"{cell['runs_per_s']} | {cell['nodes']} | {more} |")
    for name, target in result.get("targets", {}).items():
        lines.append(f"\n{name}: {json.dumps(target)}")
    return "\n".join(lines)


def main() -> None:
    """Parse arguments, measure, print the table and the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--only", action="append", choices=(*SYSTEMS, SDK, BARE))
    args = parser.parse_args()
    result = measure(runs=args.runs, only=tuple(args.only or (*SYSTEMS, SDK, BARE)))
    print(table(result))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
