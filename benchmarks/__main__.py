"""``make bench``: every figure of the benchmark suite, its target, and RESULTS.md.

Each figure runs in processes of its own on databases of its own (``planwatch_bench*`` on
the local PostgreSQL server, SQLite files under ``var/bench/``); nothing touches the
development or test databases. ``--only NAME`` (repeatable) runs some figures;
``--quick`` runs fewer repetitions (a smoke run, not for RESULTS.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import REDIS_URL, bench_env, machine, reset_database, run_module

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
RAW = HERE / "results.json"
FIGURES = ("engine", "stream", "admin", "peers", "waterfall", "threads", "inflight")


def main() -> None:
    """Run the figures, print each target and whether it was met, write RESULTS.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=FIGURES)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-write", action="store_true", help="do not rewrite RESULTS.md")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite RESULTS.md from results.json")
    args = parser.parse_args()
    if args.render:
        raw = json.loads(RAW.read_text())
        RESULTS.write_text(render(raw, targets(raw)))
        return
    quick = args.quick
    raw: dict[str, Any] = json.loads(RAW.read_text()) if RAW.exists() else {}
    raw["machine"] = machine()
    runners: dict[str, Callable[[], Any]] = {
        "engine": lambda: {db: _engine(db, quick) for db in ("sqlite", "pg")},
        "stream": lambda: _stream(quick),
        "admin": lambda: _admin(quick),
        "peers": lambda: _peers(quick),
        "waterfall": lambda: run_module("benchmarks.waterfall", "--repeats",
                                        "3" if quick else "10", env=dict(os.environ)),
        "threads": lambda: _threads(quick),
        "inflight": lambda: run_module("benchmarks.inflight", "figure",
                                       *(["--quick"] if quick else []),
                                       # BENCH_WEB_PROCESSES=N: serve --processes N
                                       *(["--web-processes", os.environ["BENCH_WEB_PROCESSES"]]
                                         if os.environ.get("BENCH_WEB_PROCESSES") else []),
                                       env=dict(os.environ), timeout=3600),
    }
    for name in args.only or FIGURES:
        began = time.monotonic()
        print(f"== {name} …", flush=True)
        try:
            raw[name] = runners[name]()
        except Exception as exc:  # one broken figure must not hide the others
            traceback.print_exc()
            raw[name] = {"error": f"{type(exc).__name__}: {exc}"}
        raw[name + "_seconds"] = round(time.monotonic() - began, 1)
        print(f"   {name} took {raw[name + '_seconds']} s", flush=True)
    raw["date"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = targets(raw)
    for row in rows:
        print(f"{'MET ' if row['met'] else 'MISS' if row['met'] is False else 'INFO'}  "
              f"{row['figure']}: {row['measured']}  (target {row['target']})")
    if not (args.no_write or quick):
        RAW.write_text(json.dumps(raw, indent=1, default=str) + "\n")
        RESULTS.write_text(render(raw, rows))
        print(f"wrote {RESULTS.relative_to(HERE.parent)}")


def _engine(db: str, quick: bool) -> Any:
    reset_database(db)
    args = ["--pairs", "10", "--batch", "16"] if quick else ["--pairs", "60", "--batch", "48"]
    small = run_module("benchmarks.engine", *args, env=bench_env(db))
    # the same graph with a plan of 215 tasks: per-run costs spread over ~450 events
    args = ["--pairs", "3", "--batch", "4"] if quick else ["--pairs", "10", "--batch", "8"]
    large = run_module("benchmarks.engine", "--plan", "large", *args, env=bench_env(db))
    return {**small, "large": large}


def _stream(quick: bool) -> Any:
    reset_database("pg")
    args = ["--runs", "1,20", "--repeats", "1", "--fanout", "20", "--browser-runs", "2"] \
        if quick else ["--runs", "1,20,100", "--repeats", "3", "--browser-runs", "10",
                       "--wide-fanout", "1000", "--web-processes", "4"]
    # The scripted model "thinks" 0.4 s a call (the dashboard's default; a real model takes
    # seconds), so events come as a run makes them. The saturated pass paces it at 20 ms:
    # 20 such runs ask one worker for more CPU than this machine has (about 35 ms of CPU a
    # run, bare LangGraph 27), so it measures queueing for the interpreter, and is reported
    # beside the figure, not as it.
    env = bench_env("pg", REDIS_URL=REDIS_URL, PLANWATCH_THINK_TIME="0.4")
    out = run_module("benchmarks.stream", *args, env=env)
    env = bench_env("pg", REDIS_URL=REDIS_URL, PLANWATCH_THINK_TIME="0.02")
    saturated = run_module("benchmarks.stream", "--runs", "20", "--repeats", "1" if quick else "2",
                           "--at-once", "", "--fanout", "0", "--browser-runs", "0", env=env)
    out["saturated_20"] = {**saturated["latency_20"], "bare": saturated["bare_20"]}
    return out


def _admin(quick: bool) -> Any:
    from benchmarks import admin_scale

    return admin_scale.measure(rows=50_000 if quick else 1_000_000, repeats=5 if quick else 30)


def _peers(quick: bool) -> Any:
    from benchmarks import peers

    return peers.measure(runs=5 if quick else 30)


def _threads(quick: bool) -> Any:
    from benchmarks import thread_search

    return thread_search.measure(repeats=10 if quick else 50)


def _get(raw: dict[str, Any], *path: str) -> Any:
    for key in path:
        if not isinstance(raw, dict) or key not in raw:
            return None
        raw = raw[key]
    return raw


def _split(figure: dict[str, Any]) -> str:
    """Where a latency goes (commit → Redis → client), and the write before it."""
    split = figure.get("split") or {}
    if "write" not in split:
        return ""
    w, r, c, s = split["write"], split["to_redis"], split["from_redis"], figure["from_stamp"]
    return (f"; commit → on Redis p50 {r['p50']:.2f} / p99 {r['p99']:.2f}, Redis → client "
            f"p50 {c['p50']:.2f} / p99 {c['p99']:.2f}; the write before it (row stamped → "
            f"committed) p50 {w['p50']:.2f} / p99 {w['p99']:.2f}, so stamped → received "
            f"p50 {s['p50']:.2f} / p99 {s['p99']:.2f}")


def targets(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per target: what was measured, the target, and whether it was met."""
    rows: list[dict[str, Any]] = []

    def add(figure: str, measured: Any, target: str, met: bool | None) -> None:
        rows.append({"figure": figure, "measured": measured, "target": target, "met": met})

    for db, label in (("sqlite", "SQLite"), ("pg", "PostgreSQL")):
        ratio = _get(raw, "engine", db, "overhead", "ratio")
        if ratio is not None:
            o = raw["engine"][db]["overhead"]
            add(f"tracing overhead, {label}",
                f"{ratio:.2f}x ({o['traced_ms_p50']:.1f} ms traced vs {o['bare_ms_p50']:.1f} ms "
                f"bare, median of {o['pairs']} pairs{_gap(o)})", "≤ 1.10x", ratio <= 1.10)
        capture = _get(raw, "engine", db, "overhead", "capture_ratio")
        if capture is not None:
            o = raw["engine"][db]["overhead"]
            add(f"model-call capture, {label}",
                f"+{(capture - 1) * 100:.1f} % ({o['traced_ms_p50']:.1f} ms traced with it vs "
                f"{o['uncaptured_ms_p50']:.1f} ms without, {o['model_calls_per_run']} model "
                f"calls a run, median of {o['pairs']} pairs)", "≤ +5 % of traced",
                capture <= 1.05)
        large = _get(raw, "engine", db, "large", "overhead")
        if large is not None:
            add(f"tracing overhead, {label}, a plan of 215 tasks",
                f"{large['ratio']:.2f}x ({large['traced_ms_p50']:.1f} ms traced vs "
                f"{large['bare_ms_p50']:.1f} ms bare, {large['events_per_run']} events a run, "
                f"median of {large['pairs']} pairs{_gap(large)})", "reported beside", None)
        ratio = _get(raw, "engine", db, "throughput", "ratio")
        if ratio is not None:
            t = raw["engine"][db]["throughput"]
            add(f"throughput, one process, {label}",
                f"{t['traced_runs_per_min']:.0f} runs/min, {t['traced_events_per_s']:.0f} "
                f"events/s; {ratio:.2f}x of bare ({t['bare_runs_per_min']:.0f} runs/min)",
                "≥ 0.9x of bare", ratio >= 0.9)
    w = _get(raw, "waterfall")
    if w and "p50" in w:
        add(f"a run with {w['model_calls']} model calls opens its waterfall (Chromium)",
            f"p50 {w['p50']:.0f} ms, p90 {w['p90']:.0f} ms (first byte {w['first_byte_p50']:.0f}"
            f" ms; the waterfall's own render {w['waterfall_render_ms']:.0f} ms; "
            f"{w['page_kib']} KiB page)", "< 1 s", w["p50"] < 1000)
    for n in (1, 20, 100):
        lat, bare = _get(raw, "stream", f"latency_{n}"), _get(raw, "stream", f"bare_{n}")
        if lat:
            met = lat["p50"] < 3 and lat["p99"] < 10 if n == 20 else None
            cpu = lat.get("cpu_ms_per_run")
            add(f"event latency, {n} concurrent runs",
                f"p50 {lat['p50']:.2f} ms, p99 {lat['p99']:.2f} ms (bare path p50 "
                f"{bare['p50']:.2f}, p99 {bare['p99']:.2f}; n={lat['n']}){_split(lat)}"
                + (f"; CPU a run: worker {cpu['worker']:.0f} ms, web server {cpu['web']:.0f} ms"
                   if cpu else ""),
                "p50 < 3 ms, p99 < 10 ms at 20 runs", met)
    burst = _get(raw, "stream", "at_once_20")
    if burst:
        add("event latency, 20 runs started at once (in step: bursts of 20 writes)",
            f"p50 {burst['p50']:.2f} ms, p99 {burst['p99']:.2f} ms (bare path fed the same "
            f"bursts p50 {burst['bare']['p50']:.2f}, p99 {burst['bare']['p99']:.2f})"
            f"{_split(burst)}", "reported", None)
    sat = _get(raw, "stream", "saturated_20")
    if sat:
        add("event latency, 20 runs paced at 20 ms a model call (the worker saturated)",
            f"p50 {sat['p50']:.2f} ms, p99 {sat['p99']:.2f} ms (bare path p50 "
            f"{sat['bare']['p50']:.2f}, p99 {sat['bare']['p99']:.2f}){_split(sat)}",
            "reported", None)
    fan = _get(raw, "stream", "fanout")
    if fan:
        bare = fan.get("bare")
        add(f"fan-out, {fan['clients']} clients on one run",
            f"p50 {fan['p50']:.2f} ms, p99 {fan['p99']:.2f} ms (n={fan['n']}{_split(fan)}"
            + (f"; bare path, {fan['clients']} clients on one group, frames of the same "
               f"{fan['frame_bytes']:,} bytes: p50 {bare['p50']:.2f}, p99 {bare['p99']:.2f}"
               if bare else "") + ")", "p99 < 20 ms", fan["p99"] < 20)
    wide = _get(raw, "stream", "fanout_wide")
    if wide:
        label = (f"fan-out, {wide['clients']:,} clients on one run over "
                 f"{wide['web_processes']} daphne processes")
        if "error" in wide:
            add(label, wide["error"], "p99 < 50 ms", False)
        else:
            bare = wide.get("bare") or {}
            twin = (f"; bare path, as many clients over as many bare daphnes on one group, "
                    f"frames of the same size: p50 {bare['p50']:.2f}, p99 {bare['p99']:.2f}"
                    if "p99" in bare else
                    f"; bare path: {bare['error']}" if "error" in bare else "")
            add(label, f"p50 {wide['p50']:.2f} ms, p99 {wide['p99']:.2f} ms "
                f"(n={wide['n']}{_split(wide)}{twin})", "p99 < 50 ms", wide["p99"] < 50)
    admin = raw.get("admin") or {}
    if "list_p50_ms" in admin:
        worst = max(v for k, v in admin.items() if k.endswith("p50_ms"))
        add(f"admin at scale, {int(admin.get('rows', 0)):,} checkpoint rows",
            ", ".join(f"{k.removesuffix('_ms')} {v:.0f} ms" for k, v in admin.items()
                      if k.endswith("_ms")), "p50 < 300 ms each", worst < 300)
    searched = raw.get("threads") or {}
    if "threads" in searched:
        worst = max(v["p99"] for v in searched.values() if isinstance(v, dict))
        add(f"thread search, {searched['threads']:,} threads (threads.search, SQLite)",
            "; ".join(f"{k}: p50 {v['p50']:.1f} ms, p99 {v['p99']:.1f} ms"
                      for k, v in searched.items() if isinstance(v, dict)),
            "p99 < 1,000 ms each", worst < 1000)
    mem = _get(raw, "stream", "memory")
    if mem:
        add(f"memory, {mem['runs_in_flight']} runs in flight",
            f"worker {mem['idle_mib']['worker']:.0f} → {mem['peak_mib']['worker']:.0f} MiB "
            f"({mem['worker_per_run_mib']:.2f} MiB a run); web {mem['idle_mib']['web']:.0f} → "
            f"{mem['peak_mib']['web']:.0f} MiB ({mem['web_per_watched_run_mib']:.2f} MiB a "
            "watched run)", "reported", None)
    browser = _get(raw, "stream", "browser")
    if browser:
        add("browser, event committed → in the DOM (Chromium)",
            f"p50 {browser['p50']:.2f} ms, p99 {browser['p99']:.2f} ms (n={browser['n']})",
            "p99 < 50 ms", browser["p99"] < 50)
    for name, t in (_get(raw, "peers", "targets") or {}).items():
        if name == "latency":
            paced = t.get("paced_runs_per_s")
            how = (f"Planwatch paced to {paced:.1f} runs/s, the peer 10 at once" if paced
                   else "both unpaced")
            add("against the peers, latency at the best peer's rate (same SDK client)",
                f"{t['system']} p99 {t['planwatch_p99_ms']:.1f} ms vs {t['best_peer']} p99 "
                f"{t['best_peer_p99_ms']:.1f} ms ({how})",
                "p99 ≤ the best peer's", t["met"])
        elif name == "first_update":
            peer = t.get("best_peer_p99_ms")
            add("against the peers, run start → first node update at 10 at once",
                f"{t['system']} p99 {t['planwatch_p99_ms']:.1f} ms"
                + (f" vs {t['best_peer']} p99 {peer:.1f} ms" if peer is not None else "")
                + _start_phases(t.get("phases") or {}), "p99 ≤ 20 ms", t["met"])
        else:
            add("against the peers, runs/s at 10 at once (same SDK client)",
                f"{t['system']} {t['planwatch_runs_per_s']:.1f} runs/s vs {t['best_peer']} "
                f"{t['best_peer_runs_per_s']:.1f} ({t['ratio']}x)", "≥ 2x the best peer",
                t["met"])
    for scenario, cells in (raw.get("inflight") or {}).items():
        t = cells.get("targets") if isinstance(cells, dict) else None
        if not t:
            continue
        label = f"many runs in flight, {scenario.replace('_', ' ')}"
        ours = cells["planwatch"]
        add(f"{label}: errors", f"{ours['runs_ok']}/{ours['runs']} runs ok"
            + (f" ({'; '.join(ours['errors'])})" if ours["errors"] else ""),
            "0 errors, every run finished", t["errors"]["met"])
        r = t["runs_per_s"]
        add(f"{label}: runs/s", f"{r['planwatch']:.2f} runs/s, {r['of_ideal']:.0%} of the "
            f"ideal {ours['ideal_runs_per_s']:.2f}" + (
                f"; best peer {r['best_peer']} {r['best_peer_runs_per_s']:.2f}"
                if r["best_peer"] else ""), "≥ 95 % of ideal and ≥ the best peer", r["met"])
        lat = t["latency_p99"]
        add(f"{label}: event latency p99", f"{lat['planwatch_ms']:.1f} ms (p50 "
            f"{ours['latency_p50_ms']:.1f})" + (
                f"; best peer {lat['best_peer']} {lat['best_peer_ms']:.1f} ms"
                if lat["best_peer"] else ""), "≤ the best peer's", lat["met"])
        first = t["first_event_p99"]
        add(f"{label}: first event p99", f"{first['planwatch_ms']:.0f} ms (web peak RSS "
            f"{ours['rss_peak_mib'].get('web', 0):.0f} MiB, worker "
            f"{ours['rss_peak_mib'].get('worker', 0):.0f} MiB; CPU a run "
            + ", ".join(f"{k} {v:.0f} ms" for k, v in ours["cpu_ms_per_run"].items()) + ")",
            f"≤ first node + 100 ms ({first['target_ms']:.0f} ms)", first["met"])
    for name in FIGURES:
        if isinstance(raw.get(name), dict) and "error" in raw[name]:
            add(name, raw[name]["error"], "runs", False)
    return rows


def _gap(o: dict[str, Any]) -> str:
    """Where a traced run's extra time goes, from the sides measured beside it."""
    if "streamed_ms_p50" not in o:
        return ""
    streaming = o["streamed_ms_p50"] - o["bare_ms_p50"]
    translating = o["translated_ms_p50"] - o["streamed_ms_p50"]
    rest = o["traced_ms_p50"] - o["translated_ms_p50"] - o["run_row_ms_p50"]
    return (f"; the gap: LangGraph streaming the parts recorded {streaming:+.1f} ms, "
            f"translating them {translating:+.1f}, storing the run row "
            f"{o['run_row_ms_p50']:.1f}, claiming, writing the events and the final "
            f"status {rest:+.1f}")


def _start_phases(phases: dict[str, dict[str, float]]) -> str:
    """Where Planwatch's runs spent the time to their first update, p50 from the request."""
    said = [
        f"{mode.replace('_', ' ').replace('concurrent 10', '10 at once')}: run row "
        f"{cell['start_run_row_p50_ms']:.0f}, claimed by the worker "
        f"{cell['start_claimed_p50_ms']:.0f}, first node's row "
        f"{cell['start_first_node_row_p50_ms']:.0f}, at the client "
        f"{cell['first_update_p50_ms']:.0f}"
        for mode, cell in phases.items()]
    return f" (p50 ms from the request, {'; '.join(said)})" if said else ""


def render(raw: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """RESULTS.md: the machine, the targets table, the peers table and the analysis."""
    m = raw["machine"]
    lines = [
        "# Benchmark results",
        "",
        f"Written by `make bench` on {raw['date']}. Raw numbers: `benchmarks/results.json`.",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, {m['os']}; "
        f"Python {m['python']}, PostgreSQL {m['postgresql']}, Redis {m['redis']}; Django "
        f"{m['django']}, Channels {m['channels']}, channels-redis {m['channels-redis']}, daphne "
        f"{m['daphne']}, LangGraph {m['langgraph']} (checkpoint-postgres "
        f"{m['langgraph-checkpoint-postgres']}, checkpoint-sqlite "
        f"{m['langgraph-checkpoint-sqlite']}), procrastinate {m['procrastinate']}.",
        "",
        "| figure | measured | target | met |",
        "| --- | --- | --- | --- |",
    ]
    for row in rows:
        met = {True: "yes", False: "**no**", None: "—"}[row["met"]]
        lines.append(f"| {row['figure']} | {row['measured']} | {row['target']} | {met} |")
    peers = raw.get("peers") or {}
    if "planwatch" in peers:
        from benchmarks.peers import table

        lines += ["", "## Against the peers", "", f"Versions: {peers.get('versions')}", "",
                  table(peers)]
    inflight = raw.get("inflight") or {}
    if any(isinstance(v, dict) and "targets" in v for v in inflight.values()):
        from benchmarks.inflight import table as inflight_table

        lines += ["", "## Many runs in flight", "",
                  f"The {inflight.get('graph', '4-node loop')} (20 nodes, each awaiting a "
                  "model call) on every server with its defaults, official langgraph-sdk "
                  "(runs.stream, custom + updates). Versions: "
                  f"{inflight.get('versions')}", inflight_table(inflight)]
    seconds = sum(v for k, v in raw.items() if k.endswith("_seconds"))
    lines += ["", f"Time taken by the figures: {seconds:.0f} s.", ""]
    analysis = HERE / "ANALYSIS.md"
    if analysis.exists():
        lines += [analysis.read_text().rstrip(), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
