"""What SSE streams leave behind in the web process: ``--streams`` streams at once, ``--rounds``
times, on Planwatch scale-out (one daphne, ``manage.py serve --processes 1``; one procrastinate
worker; PostgreSQL; Redis's pub/sub channel layer), driven by the official ``langgraph-sdk``.

Each round starts ``--streams`` runs of the 4-node loop (:mod:`benchmarks.loop_graph`) on new
threads and streams them (``--modes``, by default ``custom`` + ``updates``). ``--leave N``:
each client closes its stream after N parts instead (the run goes on without it). After a
round the web process's resident memory is read once the streams closed (``--settle``
seconds later); the login page's slowest answer during the round is measured too.

``python -m benchmarks.sse_memory [--streams 300] [--rounds 3] [--leave 0]``; environment:
``BENCH_INFLIGHT_DB`` (the PostgreSQL database, re-created), ``BENCH_REDIS_URL``,
``BENCH_NODE_SECONDS`` (0.05 here by default), and anything else for the servers (say
``MALLOC_ARENA_MAX``). Prints one JSON line last.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import time
from typing import Any

import httpx

from benchmarks import inflight, loop_graph
from benchmarks.common import rss_mib


async def astream(client: Any, leave: int, modes: list[str]) -> str:
    """One run on a new thread, streamed to its end (or for ``leave`` parts): '' or why not."""
    try:
        thread = await client.threads.create()
        parts = 0
        stream = client.runs.stream(thread["thread_id"], loop_graph.NAME, input={},
                                    stream_mode=modes)
        async for part in stream:
            if part.event == "error":
                return f"error part: {str(part.data)[:200]}"
            parts += 1
            if leave and parts >= leave:
                await stream.aclose()  # the client closes the stream: its connection too
                return ""
        return ""
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:300]


async def alogin_probe(base: str, stop: asyncio.Event) -> float:
    """The login page's slowest answer (s) until ``stop``."""
    worst = 0.0
    async with httpx.AsyncClient(timeout=60) as http:
        while not stop.is_set():
            began = time.monotonic()
            with contextlib.suppress(httpx.HTTPError):
                (await http.get(f"{base}/accounts/login/")).raise_for_status()
            worst = max(worst, time.monotonic() - began)
            await asyncio.sleep(0.5)
    return worst


async def atimed(stream: Any, seconds: float) -> str:
    """A stream's outcome, or 'timed out' (a run that never ends: heartbeats keep its
    stream open past any read timeout)."""
    try:
        return str(await asyncio.wait_for(stream, seconds))
    except TimeoutError:
        return "timed out"


async def around(served: inflight.Served, streams: int, leave: int, modes: list[str],
                 seconds: float) -> dict[str, Any]:
    """One round: ``streams`` streams at once; their failures and the login page's worst."""
    client = inflight.sdk_client(served.url, served.api_key)
    stop = asyncio.Event()
    probe = asyncio.ensure_future(alogin_probe(served.url.removesuffix("/langgraph"), stop))
    began = time.monotonic()
    try:
        results = await asyncio.gather(*(atimed(astream(client, leave, modes), seconds)
                                         for _ in range(streams)))
    finally:
        stop.set()
        await client.http.client.aclose()
    failures = [r for r in results if r]
    return {"seconds": round(time.monotonic() - began, 1), "failed": len(failures),
            "failures": failures[:3], "login_worst_s": round(await probe, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--leave", type=int, default=0,
                        help="close each stream after this many parts (0: read to the end)")
    parser.add_argument("--modes", default="custom,updates",
                        help="the stream modes, comma-separated")
    parser.add_argument("--timeout", type=float, default=300,
                        help="seconds a stream may take before it is closed and counted failed")
    parser.add_argument("--settle", type=float, default=5.0,
                        help="seconds after a round before its memory is read")
    parser.add_argument("--dump", action="store_true",
                        help="signal the web process (SIGUSR2) after each round, for a debug "
                             "hook that dumps what it holds")
    args = parser.parse_args()
    os.environ.setdefault("BENCH_NODE_SECONDS", "0.05")
    with inflight.planwatch_server("scaleout", web_processes=1) as served:
        web = served.pids["web"]
        out: dict[str, Any] = {"streams": args.streams, "leave": args.leave, "modes": args.modes,
                               "node_seconds": float(os.environ["BENCH_NODE_SECONDS"]),
                               "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX"),
                               "start_mb": round(rss_mib(web), 1), "rounds": []}
        if args.dump:
            os.kill(web, signal.SIGUSR2)
        for index in range(args.rounds):
            seen = asyncio.run(around(served, args.streams, args.leave, args.modes.split(","),
                                     args.timeout))
            time.sleep(args.settle)
            seen["web_mb"] = round(rss_mib(web), 1)
            out["rounds"].append(seen)
            print(f"round {index + 1}: {seen}", flush=True)
            if args.dump:
                os.kill(web, signal.SIGUSR2)
                time.sleep(2)
        mbs = [r["web_mb"] for r in out["rounds"]]
        out["growth_after_first_mb"] = [round(mb - mbs[0], 1) for mb in mbs[1:]]
        out["web_pid"] = web
    print(json.dumps(out))


if __name__ == "__main__":
    main()
