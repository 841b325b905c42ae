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
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import loop_graph, peers
from benchmarks.common import VAR, cpu_seconds, free_port, percentile, process, rss_mib
from benchmarks.peers_planwatch import Starter

CONFIG_DIR = Path(__file__).resolve().parent / "inflight"
PG_DB = os.environ.get("BENCH_INFLIGHT_DB", "planwatch_bench_inflight")
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
    """Environment of Planwatch's processes: ``inprocess`` (SQLite, runs inside daphne),
    ``scaleout`` (PostgreSQL, Redis, procrastinate workers) or ``postgres`` (PostgreSQL,
    Redis, runs inside the web processes: the default executor); otherwise its defaults."""
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
    if mode in ("scaleout", "postgres"):
        env.update(DATABASE_URL=f"{peers.PG_SERVER}/{PG_DB}", REDIS_URL=REDIS_URL)
        if mode == "scaleout":
            env["PLANWATCH_EXECUTOR"] = "procrastinate"
    elif mode == "inprocess":
        env["DATABASE_URL"] = f"sqlite:///{SQLITE_DB}"
    else:
        raise ValueError(f"unknown mode {mode!r}; use 'inprocess', 'scaleout' or 'postgres'")
    return env


@contextmanager
def planwatch_server(mode: str, *, web_processes: int | None = None) -> Iterator[Served]:
    """Planwatch on a fresh database of its own, with default settings; ``web_processes``:
    ``manage.py serve --processes N`` (default: serve's own, the cores on PostgreSQL)."""
    env = planwatch_env(mode)
    if mode != "inprocess":
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
        processes = ["--processes", str(web_processes)] if web_processes else []
        web = stack.enter_context(process(
            [sys.executable, "manage.py", "serve", "--port", str(port), *processes], env=env,
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
    return {"probes": probes, "load_in_flight": load, "node_seconds": loop_graph.node_seconds(),
            **await astart_phases(served.starter, starts, missing_key="missing")}


PHASES = ("run_row", "claimed", "first_node_started", "first_node_finished_less_node")


async def astart_phases(starter: Starter, starts: list[tuple[str, float]], *,
                        missing_key: str) -> dict[str, Any]:
    """p50/p99/max (ms) from each run's request to its run row, its claim, its first node's
    ``node_started`` row, and its first ``node_finished`` row less the node's own time
    (Planwatch's own records, stamped on this machine's clock as the request is)."""
    moments = json.loads(await starter.aask(
        "moments " + ",".join(run_id for run_id, _ in starts)))
    phases: dict[str, list[float]] = {name: [] for name in PHASES}
    node_ms = loop_graph.node_seconds() * 1000
    for run_id, asked in starts:
        stored, claimed, finished, started = moments.get(run_id, [None] * 4)
        for name, moment, less in (("run_row", stored, 0.0), ("claimed", claimed, 0.0),
                                   ("first_node_started", started, 0.0),
                                   ("first_node_finished_less_node", finished, node_ms)):
            if moment is not None:
                phases[name].append((moment - asked) * 1000 - less)
    return {missing_key: len(starts) - len(phases["first_node_started"]),
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


# -- the figure -------------------------------------------------------------------------------

SERVERS = ("planwatch", "langgraph-api", "aegra")
SCENARIOS = {
    # name: (runs in flight, runs, seconds a node)
    "50_in_flight": (50, 100, 0.5),
    "200_in_flight": (200, 400, 2.0),
}
QUICK = {"quick_10_in_flight": (10, 20, 0.1)}
WARMUP = 2


def tree(pid: int) -> list[int]:
    """``pid`` and every process below it (a server's workers, if it forks any)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, ()))
    return found


def rss(pid: int) -> float:
    """Resident memory of ``pid`` and its children (MiB)."""
    total = 0.0
    for each in tree(pid):
        with suppress(OSError):
            total += rss_mib(each)
    return total


def cpu(pid: int) -> float:
    """CPU seconds used so far by ``pid`` and its children."""
    total = 0.0
    for each in tree(pid):
        with suppress(OSError):
            total += cpu_seconds(each)
    return total


class PeakRss:
    """Samples the processes' resident memory every quarter second; keeps the peak."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.peak = {name: rss(pid) for name, pid in pids.items()}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.25):
            for name, pid in self.pids.items():
                self.peak[name] = max(self.peak[name], rss(pid))

    def stop(self) -> dict[str, float]:
        """Stop sampling; the peak of each process (MiB)."""
        self._stop.set()
        self._thread.join()
        return {name: round(value, 1) for name, value in self.peak.items()}


async def ameasure(served: Served, *, in_flight: int, runs: int, node_seconds: float
                   ) -> dict[str, Any]:
    """``runs`` runs streamed, ``in_flight`` at once, on one server."""
    client = sdk_client(served.url, served.api_key)
    try:
        await peers.aphase(lambda: astream_run(client), runs=WARMUP, concurrency=1)
        baseline = {name: round(rss(pid), 1) for name, pid in served.pids.items()}
        used = {name: cpu(pid) for name, pid in served.pids.items()}
        peak = PeakRss(served.pids)
        results, rate = await peers.aphase(lambda: astream_run(client), runs=runs,
                                           concurrency=in_flight)
        peaks = peak.stop()
        used = {name: cpu(pid) - used[name] for name, pid in served.pids.items()}
    finally:
        await client.http.client.aclose()
    await asyncio.sleep(2)  # the streams closed: what the server gives back
    after = {name: round(rss(pid), 1) for name, pid in served.pids.items()}
    ok = [r for r in results if not r.error]
    phases = {} if served.starter is None else {"start_phases": await astart_phases(
        served.starter, [(r.run_id, r.asked) for r in ok if r.run_id], missing_key="unseen")}
    latencies = [lat for r in ok for lat in r.latencies]
    nodes = len(loop_graph.NODES) * loop_graph.ITERATIONS
    ideal = in_flight / (nodes * node_seconds)
    return {
        "runs": runs, "in_flight": in_flight, "node_seconds": node_seconds,
        "runs_ok": len(ok), "errors": sorted({r.error for r in results if r.error})[:5],
        "runs_per_s": round(rate, 3), "ideal_runs_per_s": round(ideal, 3),
        "of_ideal": round(rate / ideal, 3),
        "latency_p50_ms": round(percentile(latencies, 50), 2),
        "latency_p99_ms": round(percentile(latencies, 99), 2),
        "first_event_p50_ms": round(percentile([r.first_event_ms for r in ok], 50), 1),
        "first_event_p99_ms": round(percentile([r.first_event_ms for r in ok], 99), 1),
        "rss_baseline_mib": baseline, "rss_peak_mib": peaks, "rss_after_mib": after,
        "cpu_ms_per_run": {name: round(seconds / runs * 1000, 1)
                           for name, seconds in used.items()},
        **phases,
    }


@contextmanager
def server(name: str, *, in_flight: int, node_seconds: float,
           web_processes: int | None = None) -> Iterator[Served]:
    """One of :data:`SERVERS`, with its default settings, serving the loop (Planwatch with
    ``web_processes`` web processes, if given)."""
    env = {"BENCH_NODE_SECONDS": str(node_seconds)}
    if name == "planwatch":
        os.environ["BENCH_NODE_SECONDS"] = str(node_seconds)  # Planwatch's processes
        with planwatch_server("scaleout", web_processes=web_processes) as served:
            yield served
        return
    pids: dict[str, int] = {}
    if name == "langgraph-api":
        with peers.langgraph_api_server(config_dir=CONFIG_DIR, jobs=in_flight, env=env,
                                        pids=pids) as url:
            yield Served(url, None, pids)
    elif name == "aegra":
        with peers.aegra_server(config_dir=CONFIG_DIR, env=env, pids=pids) as url:
            yield Served(url, None, pids)
    else:
        raise ValueError(f"unknown server {name!r}; use one of {', '.join(SERVERS)}")


def measure(*, quick: bool = False, only: tuple[str, ...] = SERVERS,
            web_processes: int | None = None, runs: int | None = None) -> dict[str, Any]:
    """Every scenario on every server (peers first), and the targets of each scenario;
    ``web_processes``: Planwatch's (``serve --processes N``); ``runs``: that many runs a
    scenario (at most that many in flight), for a smoke run."""
    out: dict[str, Any] = {"graph": f"{len(loop_graph.NODES)}-node loop, "
                                    f"{loop_graph.ITERATIONS} iterations"}
    if set(only) & set(SERVERS[1:]):
        peers.ensure_peers_venv()
        out["versions"] = peers.peer_versions()
    if web_processes:
        out["planwatch_web_processes"] = web_processes
    for scenario, (in_flight, count, node_seconds) in (QUICK if quick else SCENARIOS).items():
        if runs:
            count, in_flight = runs, min(in_flight, runs)
        cells: dict[str, Any] = {}
        for name in reversed(SERVERS):
            if name not in only:
                continue
            try:
                with server(name, in_flight=in_flight, node_seconds=node_seconds,
                            web_processes=web_processes) as served:
                    cells[name] = asyncio.run(ameasure(
                        served, in_flight=in_flight, runs=count, node_seconds=node_seconds))
            except Exception as exc:  # one server that fails must not hide the others
                cells[name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        cells["targets"] = targets(cells)
        out[scenario] = cells
    return out


def targets(cells: dict[str, Any]) -> dict[str, Any]:
    """Issue 31's terms for one scenario: Planwatch with 0 errors; runs/s ≥ 95 % of the
    ideal and ≥ the best peer's; event latency p99 ≤ the best peer's; first event p99 ≤
    the first node + 100 ms."""
    ours = cells.get("planwatch") or {}
    if "runs_ok" not in ours:
        return {}
    measured = [n for n in SERVERS[1:] if "runs_per_s" in (cells.get(n) or {})]
    best = max(measured, key=lambda n: cells[n]["runs_per_s"]) if measured else None
    low = min(measured, key=lambda n: cells[n]["latency_p99_ms"]) if measured else None
    first_node_ms = ours["node_seconds"] * 1000
    return {
        "errors": {"runs_ok": ours["runs_ok"], "runs": ours["runs"],
                   "met": ours["runs_ok"] == ours["runs"]},
        "runs_per_s": {"planwatch": ours["runs_per_s"], "of_ideal": ours["of_ideal"],
                       "best_peer": best,
                       "best_peer_runs_per_s": cells[best]["runs_per_s"] if best else None,
                       "met": ours["of_ideal"] >= 0.95 and (
                           best is None or ours["runs_per_s"] >= cells[best]["runs_per_s"])},
        "latency_p99": {"planwatch_ms": ours["latency_p99_ms"], "best_peer": low,
                        "best_peer_ms": cells[low]["latency_p99_ms"] if low else None,
                        "met": low is None
                        or ours["latency_p99_ms"] <= cells[low]["latency_p99_ms"]},
        "first_event_p99": {"planwatch_ms": ours["first_event_p99_ms"],
                            "target_ms": first_node_ms + 100,
                            "met": ours["first_event_p99_ms"] <= first_node_ms + 100},
    }


def table(result: dict[str, Any]) -> str:
    """The figure as a Markdown table per scenario."""
    lines = []
    for scenario, cells in result.items():
        if not isinstance(cells, dict) or "targets" not in cells:
            continue
        lines += ["", f"### {scenario.replace('_', ' ')}", "",
                  "| server | runs ok | runs/s (of ideal) | event latency p50 / p99 ms | "
                  "first event p99 ms | peak RSS MiB | RSS after MiB | CPU ms a run |",
                  "| --- | ---: | ---: | ---: | ---: | --- | --- | --- |"]
        for name in SERVERS:
            cell = cells.get(name)
            if not cell:
                continue
            if "error" in cell:
                lines.append(f"| {name} | {cell['error']} | | | | | | |")
                continue
            lines.append(
                f"| {name} | {cell['runs_ok']}/{cell['runs']} | {cell['runs_per_s']:.2f} "
                f"({cell['of_ideal']:.0%} of {cell['ideal_runs_per_s']:.2f}) | "
                f"{cell['latency_p50_ms']:.1f} / {cell['latency_p99_ms']:.1f} | "
                f"{cell['first_event_p99_ms']:.0f} | {_by_process(cell['rss_peak_mib'])} | "
                f"{_by_process(cell['rss_after_mib'])} (baseline "
                f"{_by_process(cell['rss_baseline_mib'])}) | "
                f"{_by_process(cell['cpu_ms_per_run'])} |")
        ours = cells.get("planwatch", {}).get("start_phases")
        if ours:
            lines += ["", "Planwatch's runs from the request (p50 / p99 ms): " + ", ".join(
                f"{name.replace('_', ' ')} {ours[f'{name}_p50_ms']:.0f} / "
                f"{ours[f'{name}_p99_ms']:.0f}" for name in PHASES)
                + f"; first event at the client p50 / p99 "
                  f"{cells['planwatch']['first_event_p50_ms']:.0f} / "
                  f"{cells['planwatch']['first_event_p99_ms']:.0f}."]
    return "\n".join(lines)


def _by_process(values: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.0f}" for name, value in values.items())


def main() -> None:
    """Parse arguments, measure, print JSON (the last line)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    start = sub.add_parser("start", help="request → first node start, with free slots")
    start.add_argument("--mode", action="append", choices=("inprocess", "scaleout"))
    start.add_argument("--probes", type=int, default=40)
    start.add_argument("--load", type=int, default=20)
    start.add_argument("--gap", type=float, default=0.25)
    fig = sub.add_parser("figure", help="the 'many runs in flight' figure")
    fig.add_argument("--quick", action="store_true",
                     help="10 in flight, 20 runs, 100 ms nodes (a smoke run)")
    fig.add_argument("--only", action="append", choices=SERVERS)
    fig.add_argument("--web-processes", type=int, default=None,
                     help="Planwatch served by `manage.py serve --processes N` (default: "
                          "serve's own, the cores)")
    fig.add_argument("--runs", type=int, default=None,
                     help="this many runs a scenario, at most as many in flight (a smoke run)")
    args = parser.parse_args()
    if args.what == "figure":
        result = measure(quick=args.quick, only=tuple(args.only or SERVERS),
                         web_processes=args.web_processes, runs=args.runs)
        print(table(result))
    elif args.what == "start":
        result = measure_start(modes=tuple(args.mode or ("inprocess", "scaleout")),
                               probes=args.probes, load=args.load, gap=args.gap)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
