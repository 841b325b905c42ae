"""CPU a run costs Planwatch, by process, and where it goes (issue 52).

Wall-clock figures move with whatever else the machine runs; CPU time a process used for a
run moves much less. This serves Planwatch as the "many runs in flight" figure does
(:func:`benchmarks.inflight.planwatch_server`: daphne, one procrastinate worker,
PostgreSQL, Redis) and reads each process's CPU time (user + system, its children
included) around a phase:

- ``runs``: ``--runs`` runs of the 4-node loop streamed with the official SDK,
  ``--in-flight`` at once (the figure's client: ``runs.stream``, custom + updates);
- ``starts``: ``--starts`` run starts one at a time (``POST /threads`` then
  ``POST /threads/<id>/runs``), the web processes' CPU a start (their idle CPU over the
  same time, measured just before, taken off).

``--calibrate`` times a fixed loop of pure Python (:func:`calibration`) before and after each
measurement and adds the figures scaled to a machine where that loop takes one second of
CPU (:func:`calibrated`): this VM's speed drifts by half within minutes (the loop took
1.11 to 1.68 s in one quarter of an hour), more than most changes move a run's CPU. The
loop runs in this (the client's) process: in stop 57 it went from 1.1-1.7 s to 0.5-0.7 s
while a run cost the servers as much as before, so the raw figures stay the ones to
compare, and the scaled ones a hint (benchmarks/ANALYSIS.md, stop 57).

``ab BASE [--rounds N] [runs options]`` measures ``runs`` in the tree ``BASE`` (A: a
worktree of the commit before a change, with this module copied in) and in this one (B)
*at the same time*, each on servers, a database and a Redis db of its own, their phases
begun together, and prints B's CPU a run over A's each round (:func:`pair`). Measured one
after the other, A and B drift apart with the VM; measured together, they drift together.
Use half the usual ``--in-flight`` (each side's runs share the machine with the other's).

``--profile DIR`` records each process with py-spy (``--gil --idle``, raw stacks) during
the phase instead, and prints where the samples went (:func:`breakdown`); CPU figures of a
profiled phase are not comparable with unprofiled ones. ``python -m benchmarks.cpu
breakdown FILE...`` prints the table of recorded profiles again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks import inflight, peers

PY_SPY = os.environ.get("PY_SPY") or str(next(
    (path for path in (Path(sys.executable).parent / "py-spy", shutil.which("py-spy"))
     if path and Path(path).exists()), "py-spy"))
"""py-spy (a dev extra): ``PY_SPY``, else beside this Python, else on ``PATH``."""


def cpu_of(served: inflight.Served) -> dict[str, float]:
    """CPU seconds each of Planwatch's processes (with its children) has used so far."""
    return {name: inflight.cpu(pid) for name, pid in served.pids.items()}


@contextmanager
def profiled(served: inflight.Served, directory: Path | None, *, rate: int = 100
             ) -> Iterator[None]:
    """py-spy on every process of ``served`` while the block runs (nothing without
    ``directory``)."""
    if directory is None:
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    spies = [subprocess.Popen(
        [PY_SPY, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw",
         "--gil", "--idle", "--subprocesses", "-o", str(directory / f"{name}.txt")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for name, pid in served.pids.items()]
    time.sleep(1.5)  # attached
    try:
        yield
    finally:
        for spy in spies:
            spy.send_signal(2)  # SIGINT: py-spy writes what it recorded
        for spy in spies:
            spy.wait(60)


async def aruns(served: inflight.Served, *, runs: int, in_flight: int,
                barrier: Barrier | None = None) -> dict[str, Any]:
    """``runs`` streamed runs, ``in_flight`` at once; the CPU a run of each process (ms).
    With ``barrier``, the runs begin when every party's servers are warm too."""
    client = inflight.sdk_client(served.url, served.api_key)
    try:
        await peers.aphase(lambda: inflight.astream_run(client), runs=2, concurrency=1)
        if barrier is not None:
            await asyncio.to_thread(barrier.wait)
        before = cpu_of(served)
        began = time.perf_counter()
        results, rate = await peers.aphase(lambda: inflight.astream_run(client), runs=runs,
                                           concurrency=in_flight)
        seconds = time.perf_counter() - began
        used = {name: value - before[name] for name, value in cpu_of(served).items()}
    finally:
        await client.http.client.aclose()
    errors = sorted({r.error for r in results if r.error})
    per_run = {name: round(value / runs * 1000, 1) for name, value in used.items()}
    return {"runs": runs, "in_flight": in_flight, "errors": errors[:3],
            "runs_ok": runs - sum(1 for r in results if r.error), "seconds": round(seconds, 1),
            "runs_per_s": round(rate, 2), "cpu_ms_per_run": per_run,
            "cpu_ms_per_run_total": round(sum(per_run.values()), 1)}


async def astarts(served: inflight.Served, *, starts: int) -> dict[str, Any]:
    """``starts`` run starts one at a time; the web processes' CPU a start (ms), less
    what they use idle over as long."""
    client = inflight.sdk_client(served.url, served.api_key)
    try:
        for _ in range(3):  # warm
            thread = await client.threads.create()
            await client.runs.create(thread["thread_id"], inflight.loop_graph.NAME, input={})
        await asyncio.sleep(2)
        idle_before, idle_began = cpu_of(served)["web"], time.perf_counter()
        await asyncio.sleep(5)
        idle_rate = (cpu_of(served)["web"] - idle_before) / (time.perf_counter() - idle_began)
        before, began = cpu_of(served)["web"], time.perf_counter()
        for _ in range(starts):
            thread = await client.threads.create()
            await client.runs.create(thread["thread_id"], inflight.loop_graph.NAME, input={})
        seconds = time.perf_counter() - began
        used = cpu_of(served)["web"] - before
    finally:
        await client.http.client.aclose()
    return {"starts": starts, "seconds": round(seconds, 1),
            "web_cpu_ms_per_start": round(used / starts * 1000, 2),
            "web_idle_cpu_ms_per_s": round(idle_rate * 1000, 2),
            "web_cpu_ms_per_start_less_idle": round(
                (used - idle_rate * seconds) / starts * 1000, 2)}


class Barrier:
    """A file barrier between the measurements of ``parties`` processes (:func:`pair`):
    each names itself in ``directory`` and waits until all have, round after round."""

    def __init__(self, directory: Path, parties: int) -> None:
        self.directory, self.parties, self.round = directory, parties, 0

    def wait(self, timeout: float = 600.0) -> None:
        """Arrive at this round's barrier; return once every party has (or raise)."""
        self.round += 1
        here = self.directory / str(self.round)
        here.mkdir(parents=True, exist_ok=True)
        (here / f"{os.getpid()}-{id(self)}").touch()
        deadline = time.monotonic() + timeout
        while len(list(here.iterdir())) < self.parties:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.parties} parties never met at {here}")
            time.sleep(0.05)


AB_SIDES = (("A", "planwatch_bench_ab_a", 13), ("B", "planwatch_bench_ab_b", 14))
"""Each side of :func:`pair`: its label, database and Redis db."""


def pair(base: Path, args: list[str], *, rounds: int) -> list[dict[str, Any]]:
    """``benchmarks.cpu runs <args>`` in ``base`` (A) and in this tree (B) at once, each on
    its own servers, database and Redis db, their measured phases begun together
    (:class:`Barrier`), ``rounds`` times on the same servers: both sides share whatever
    the machine does meanwhile, so B's CPU a run against A's is a ratio the VM's drift
    (stop 57: half of a run's CPU within minutes) moves far less than either figure.
    ``base`` must hold this module (copy it there)."""
    with tempfile.TemporaryDirectory(prefix="planwatch-ab-") as directory:
        children = []
        for (label, database, redis_db), tree in zip(AB_SIDES, (base, peers.ROOT),
                                                      strict=True):
            env = {**os.environ, "BENCH_INFLIGHT_DB": database,
                   "BENCH_REDIS_URL": f"redis://127.0.0.1:6379/{redis_db}"}
            log = Path(directory) / f"{label}.log"
            with log.open("w") as out:  # the child keeps its own descriptor
                children.append((label, log, subprocess.Popen(
                    [sys.executable, "-m", "benchmarks.cpu", "runs", *args,
                     "--repeat", str(rounds), "--barrier", directory, "--parties", "2"],
                    cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT)))
        results: dict[str, list[dict[str, Any]]] = {}
        for label, log, child in children:
            child.wait()
            text = log.read_text()
            results[label] = [json.loads(line) for line in text.splitlines()
                              if line.startswith("{")]
            if child.returncode or len(results[label]) != rounds:
                raise RuntimeError(f"side {label} failed:\n{text[-3000:]}")
    return [{"A": a, "B": b, "B/A": round(b["cpu_ms_per_run_total"]
                                          / a["cpu_ms_per_run_total"], 3)}
            for a, b in zip(results["A"], results["B"], strict=True)]


CALIBRATION_ADDITIONS = 10_000_000


def calibration() -> float:
    """Seconds of CPU this process takes for :data:`CALIBRATION_ADDITIONS` additions in a
    Python loop: how fast the machine runs Python right now."""
    began = time.process_time()
    total = 0
    for number in range(CALIBRATION_ADDITIONS):
        total += number
    return time.process_time() - began


def calibrated(result: dict[str, Any], before: float, after: float) -> dict[str, Any]:
    """``result`` with the calibrations around it, and each of its CPU figures scaled to a
    machine where :func:`calibration` takes one second (divided by the mean of the two)."""
    loop = (before + after) / 2
    scaled: dict[str, Any] = {"calibration_s": [round(before, 3), round(after, 3)]}
    if "cpu_ms_per_run" in result:
        scaled["cpu_ms_per_run_at_1s_loop"] = {
            name: round(value / loop, 1) for name, value in result["cpu_ms_per_run"].items()}
        scaled["cpu_ms_per_run_total_at_1s_loop"] = round(
            result["cpu_ms_per_run_total"] / loop, 1)
    if "web_cpu_ms_per_start_less_idle" in result:
        scaled["web_cpu_ms_per_start_less_idle_at_1s_loop"] = round(
            result["web_cpu_ms_per_start_less_idle"] / loop, 2)
    return {**result, **scaled}


# -- where the samples went ------------------------------------------------------------------

OWNING: tuple[tuple[str, tuple[str, ...]], ...] = (
    # work that owns everything beneath it, wherever it sits in the stack
    ("pollers (deadlines, notices, crons)", ("dashboard/deadlines.py", "dashboard/notices.py",
                                             "dashboard/crons.py")),
    ("after a run stops (dispatch.after_stopped)", ("after_stopped (dashboard/runs/",)),
)
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # (name, marks: a frame belongs to the category if it holds one; py-spy names a frame
    # "function (path/from/site-packages.py:line)")
    ("SSE framing (lgserver/stream)", ("lgserver/stream.py", "runs/follow.py")),
    ("doorbells (channel layer, Redis)", ("runs/doorbells.py", "runs/tokens.py",
                                          "(channels_redis/", "runs/layers.py", "(redis/",
                                          "(msgpack")),
    ("checkpoint writes (savers)", ("runs/savers.py", "(postgres/", "(serde/",
                                    "checkpoint/")),
    ("event writes (record, store)", ("runs/record.py", "runs/store.py")),
    ("procrastinate (jobs, dispatch)", ("(procrastinate/", "runs/jobs.py",
                                        "runs/dispatch.py")),
    ("request parsing (DRF bodies, parsers)", ("lgserver/bodies.py", "api/parsers.py",
                                               "rest_framework/serializers.py",
                                               "rest_framework/fields.py",
                                               "rest_framework/parsers.py")),
    ("auth (x-api-key, policy)", ("lgserver/auth.py", "api/auth.py", "dashboard/policy.py",
                                  "contrib/auth/", "(knox/", "(axes/")),
    ("run start (views, thread_runs, services)", ("lgserver/views.py", "thread_runs.py",
                                                  "dashboard/services.py",
                                                  "lgserver/shapes.py", "dashboard/limits.py")),
    ("LangGraph itself", ("(pregel/", "(_internal/", "(graph/", "(runtime.py",
                          "(langchain_core/", "(channels/last_value", "(channels/base",
                          "(channels/binop", "(channels/ephemeral", "(channels/named")),
    ("engine (execution, translate, model calls)", ("runs/execution.py", "runs/translate.py",
                                                    "runs/modelcalls.py",
                                                    "Executor.aexecute", "Executor._hold")),
    ("ORM (django.db)", ("(django/db/",)),
    ("SQL driver (psycopg)", ("(psycopg/", "(psycopg_pool/")),
    ("middleware, request handling", ("(django/", "web/middleware.py", "(whitenoise/",
                                      "(asgiref/", "(rest_framework/", "(corsheaders/",
                                      "(channels/", "(django_htmx/", "(prometheus_client/")),
    ("daphne/twisted (HTTP)", ("(daphne/", "(twisted/", "(autobahn/")),
    ("event loop, threads, idle", ("(asyncio/", "(selectors.py", "(threading.py",
                                   "(concurrent/")),
)
SPECIFIC = 10
"""The first categories name the work; the rest name only the layer it ran in."""


def category(stack: str) -> str:
    """The category of one ``;``-joined stack (outer first): an :data:`OWNING` one
    anywhere in it, else the innermost frame that names the work (an ORM call made by the
    event writer counts as an event write), else the innermost frame's layer."""
    for name, marks in OWNING:
        if any(mark in stack for mark in marks):
            return name
    frames = stack.split(";")
    for group in (CATEGORIES[:SPECIFIC], CATEGORIES[SPECIFIC:]):
        for frame in reversed(frames):
            for name, marks in group:
                if any(mark in frame for mark in marks):
                    return name
    return "other"


def breakdown(path: Path) -> dict[str, int]:
    """Samples of a py-spy raw file by :func:`category`."""
    counts: Counter[str] = Counter()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            counts[category(stack)] += int(count)
    return dict(counts.most_common())


def breakdown_table(paths: list[Path], cpu_ms: dict[str, float] | None = None) -> str:
    """A Markdown table: each file's samples by category, as a share (and as ms of a run's
    CPU when ``cpu_ms`` gives each file's process figure)."""
    shares = {path.stem: breakdown(path) for path in paths}
    names = sorted({n for counts in shares.values() for n in counts},
                   key=lambda n: -sum(c.get(n, 0) / max(1, sum(c.values()))
                                      for c in shares.values()))
    head = " | ".join(f"{stem} %" + (" (ms)" if cpu_ms else "") for stem in shares)
    lines = [f"| where | {head} |", "| --- |" + " ---: |" * len(shares)]
    for name in names:
        cells = []
        for stem, counts in shares.items():
            share = counts.get(name, 0) / max(1, sum(counts.values()))
            cell = f"{share:.0%}"
            if cpu_ms and stem in cpu_ms:
                cell += f" ({share * cpu_ms[stem]:.1f})"
            cells.append(cell)
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main() -> None:
    """Parse arguments, serve, measure, print the figures (JSON, the last line)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    runs = sub.add_parser("runs", help="CPU a streamed run, by process")
    runs.add_argument("--runs", type=int, default=100)
    runs.add_argument("--in-flight", type=int, default=50)
    runs.add_argument("--node-seconds", type=float, default=0.5)
    starts = sub.add_parser("starts", help="web CPU a run start")
    starts.add_argument("--starts", type=int, default=100)
    for each in (runs, starts):
        each.add_argument("--web-processes", type=int, default=None)
        each.add_argument("--mode", choices=("scaleout", "postgres"), default="scaleout",
                          help="scaleout: procrastinate workers (the figure's); postgres: "
                               "runs inside the web processes, on PostgreSQL and Redis")
        each.add_argument("--repeat", type=int, default=1,
                          help="measure this many times on the same servers (each printed)")
        each.add_argument("--calibrate", action="store_true",
                          help="time a fixed Python loop around each measurement and scale "
                               "the CPU figures to a machine where it takes 1 s")
        each.add_argument("--profile", type=Path, default=None,
                          help="record each process with py-spy into this directory")
    runs.add_argument("--barrier", type=Path, default=None, help=argparse.SUPPRESS)
    runs.add_argument("--parties", type=int, default=2, help=argparse.SUPPRESS)
    both = sub.add_parser("ab", help="CPU a streamed run of another tree (A) and this one "
                                     "(B), measured at the same time")
    both.add_argument("base", type=Path, help="A's tree (holding this module)")
    both.add_argument("--rounds", type=int, default=3)
    again = sub.add_parser("breakdown", help="the table of recorded py-spy raw files")
    again.add_argument("files", type=Path, nargs="+")
    args, rest = parser.parse_known_args()
    if args.what == "ab":
        rounds = pair(args.base, rest, rounds=args.rounds)
        for index, one in enumerate(rounds, 1):
            print(f"round {index}: A {one['A']['cpu_ms_per_run']} "
                  f"{one['A']['cpu_ms_per_run_total']}, B {one['B']['cpu_ms_per_run']} "
                  f"{one['B']['cpu_ms_per_run_total']}, B/A {one['B/A']}")
        ratios = [one["B/A"] for one in rounds]
        print(json.dumps({"rounds": rounds, "B/A": ratios,
                          "B/A_mean": round(sum(ratios) / len(ratios), 3)}))
        return
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.what == "breakdown":
        print(breakdown_table(args.files))
        return
    node_seconds = getattr(args, "node_seconds", 0.5)
    os.environ["BENCH_NODE_SECONDS"] = str(node_seconds)
    with (inflight.planwatch_server(args.mode, web_processes=args.web_processes) as served,
          profiled(served, args.profile)):
        results = []
        barrier = (Barrier(args.barrier, args.parties)
                   if getattr(args, "barrier", None) is not None else None)
        for _ in range(args.repeat):
            before = calibration() if args.calibrate else 0.0
            if args.what == "runs":
                result = asyncio.run(aruns(served, runs=args.runs, in_flight=args.in_flight,
                                           barrier=barrier))
            else:
                result = asyncio.run(astarts(served, starts=args.starts))
            if args.calibrate:
                result = calibrated(result, before, calibration())
            results.append(result)
            print(json.dumps(result), flush=True)
    result = results[-1]
    if args.profile:
        files = sorted(args.profile.glob("*.txt"))
        per_run = result.get("cpu_ms_per_run") or {"web": result["web_cpu_ms_per_start"]}
        print(breakdown_table(files, per_run))


if __name__ == "__main__":
    main()
