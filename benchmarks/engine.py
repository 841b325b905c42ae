"""Tracing overhead and throughput: the run service against bare LangGraph, same saver.

``python -m benchmarks.engine`` (with the bench environment of ``benchmarks.common``)
prints one JSON object. Both sides run in this process, on the executor's own event loop,
with the same compiled graph, the same saver on the same pool (on PostgreSQL an instance
of its own per run, as the run service gives every run) and the same durability
(``PLANWATCH["DURABILITY"]``, LangGraph's default "async"; "sync" is measured too), so the
ratio isolates what Planwatch adds: the run row, claiming, the event stream
(tasks/checkpoints/custom with subgraphs), the event rows and the final status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from typing import Any

import django

GRAPH = "decomposition"
INPUTS = {
    "small": {"breadth": 2, "goal": "Write a short market report"},  # 14 steps, ~40 events
    "large": {"breadth": 14, "goal": "Write a market report"},  # ~215 tasks, ~900 events
}
INPUT = INPUTS["small"]


def main() -> None:
    """Measure alternating single runs (overhead) and a batch of concurrent runs."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--batch", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--plan", choices=INPUTS, default="small")
    args = parser.parse_args()
    global INPUT
    INPUT = INPUTS[args.plan]
    django.setup()
    from django.db import connection

    from dashboard.runs.dispatch import dispatch_queued_after
    from dashboard.runs.executor import Executor

    executor = Executor(max_concurrent=args.concurrency, think_time=0,
                        on_stopped=dispatch_queued_after)
    executor.start()
    try:
        result = {
            "db": connection.vendor,
            "graph": GRAPH,
            "input": INPUT,
            **_overhead(executor, pairs=args.pairs),
            **_throughput(executor, batch=args.batch, concurrency=args.concurrency),
        }
    finally:
        executor.stop()
    print(json.dumps(result))


def _on_loop(executor: Any, coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, executor._loop).result()


def _new_run() -> Any:
    from dashboard.models import Run
    from planner.registry import get_graph

    spec = get_graph(GRAPH)
    run_id = uuid.uuid4()
    return Run.objects.create(id=run_id, graph=spec.name, graph_version=spec.version,
                              thread_id=spec.thread_id(str(run_id)),
                              input=spec.make_input(INPUT))


async def _atraced(executor: Any) -> tuple[float, float]:
    """A run through the run service: its row stored, then executed; (total, row) seconds."""
    from asgiref.sync import sync_to_async

    began = time.perf_counter()
    run = await sync_to_async(_new_run)()
    stored = time.perf_counter()
    await executor.aexecute(run.id, "start")
    return time.perf_counter() - began, stored - began


async def _abare(executor: Any, durability: str | None = None, *, parts: str = "") -> float:
    """The graph alone (``ainvoke``); with ``parts``, streamed as the executor streams it
    ("streamed": the parts consumed, "translated": also translated into events)."""
    from django.conf import settings

    from dashboard.runs.translate import STREAM_MODES, StreamTranslator
    from planner.registry import get_graph

    # the saver as the run service gives each run (its own instance on PostgreSQL)
    _spec, graph, _watch = await executor.agraph(GRAPH)
    config = {"configurable": {"thread_id": f"bare-{uuid.uuid4()}"}, "recursion_limit": 10_000}
    durable = durability or settings.PLANWATCH["DURABILITY"]
    payload = get_graph(GRAPH).make_input(INPUT)
    began = time.perf_counter()
    if not parts:
        await graph.ainvoke(payload, config, durability=durable)
        return time.perf_counter() - began
    translator = StreamTranslator(seen_checkpoints=set())
    async for ns, mode, data in graph.astream(payload, config, stream_mode=STREAM_MODES,
                                              subgraphs=True, durability=durable):
        if parts == "translated":
            translator.translate(ns, mode, data)
    return time.perf_counter() - began


def _overhead(executor: Any, *, pairs: int) -> dict[str, Any]:
    from django.conf import settings

    from dashboard.models import Run, RunEvent

    for _ in range(3):  # warm up: compile, open the pool, fill caches
        _on_loop(executor, _abare(executor))
        _on_loop(executor, _atraced(executor))
    traced, rows, bare, bare_sync, streamed, translated = [], [], [], [], [], []
    uncaptured: list[float] = []  # traced with no model-call capture (PLANWATCH_MODEL_CALLS)

    def one_traced() -> None:
        total, row = _on_loop(executor, _atraced(executor))
        traced.append(total)
        rows.append(row)

    def one_uncaptured() -> None:
        settings.PLANWATCH = {**settings.PLANWATCH, "MODEL_CALLS": False}
        try:
            uncaptured.append(_on_loop(executor, _atraced(executor))[0])
        finally:
            settings.PLANWATCH = {**settings.PLANWATCH, "MODEL_CALLS": True}

    for i in range(pairs):  # alternate (and swap the order) so drift hits both sides
        if i % 2:
            one_traced()
            bare.append(_on_loop(executor, _abare(executor)))
        else:
            bare.append(_on_loop(executor, _abare(executor)))
            one_traced()
        bare_sync.append(_on_loop(executor, _abare(executor, "sync")))
        one_uncaptured()
        # where the gap goes: LangGraph streaming the parts the executor records, and
        # translating them, each measured alone
        streamed.append(_on_loop(executor, _abare(executor, parts="streamed")))
        translated.append(_on_loop(executor, _abare(executor, parts="translated")))
    last = Run.objects.order_by("-created_at").first()
    assert last is not None and last.status == Run.Status.SUCCEEDED, last and last.error_message
    events = RunEvent.objects.filter(run=last).count()
    captured = Run.objects.filter(model_calls__gt=0).order_by("-created_at").first()
    calls = captured.model_calls if captured else 0
    med_t, med_b = statistics.median(traced), statistics.median(bare)
    med_u = statistics.median(uncaptured)
    return {
        "overhead": {
            "pairs": pairs,
            "events_per_run": events,
            "traced_ms_p50": med_t * 1000,
            "bare_ms_p50": med_b * 1000,
            "durability": settings.PLANWATCH["DURABILITY"],
            "bare_sync_durability_ms_p50": statistics.median(bare_sync) * 1000,
            "streamed_ms_p50": statistics.median(streamed) * 1000,
            "translated_ms_p50": statistics.median(translated) * 1000,
            "run_row_ms_p50": statistics.median(rows) * 1000,
            "ratio": med_t / med_b,
            "traced_ms_iqr": _iqr(traced) * 1000,
            # what recording the model calls adds to a traced run
            "model_calls_per_run": calls,
            "uncaptured_ms_p50": med_u * 1000,
            "capture_ratio": med_t / med_u,
            "bare_ms_iqr": _iqr(bare) * 1000,
        }
    }


def _throughput(executor: Any, *, batch: int, concurrency: int) -> dict[str, Any]:
    from dashboard.models import Run, RunEvent

    async def atraced_batch() -> float:
        from asgiref.sync import sync_to_async

        runs = [await sync_to_async(_new_run)() for _ in range(batch)]
        began = time.perf_counter()
        await asyncio.gather(*(executor.aexecute(r.id, "start") for r in runs))
        elapsed = time.perf_counter() - began
        ids = [r.id for r in runs]
        done = await Run.objects.filter(id__in=ids, status=Run.Status.SUCCEEDED).acount()
        assert done == batch, f"{batch - done} runs did not succeed"
        atraced_batch.events = await RunEvent.objects.filter(run_id__in=ids).acount()
        return elapsed

    async def abare_batch() -> float:
        sem = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with sem:
                await _abare(executor)

        began = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(batch)))
        return time.perf_counter() - began

    traced, bare = [], []
    for _ in range(3):
        bare.append(_on_loop(executor, abare_batch()))
        traced.append(_on_loop(executor, atraced_batch()))
    t, b = statistics.median(traced), statistics.median(bare)
    return {
        "throughput": {
            "batch": batch,
            "concurrency": concurrency,
            "traced_runs_per_min": batch / t * 60,
            "bare_runs_per_min": batch / b * 60,
            "traced_events_per_s": atraced_batch.events / t,  # type: ignore[attr-defined]
            "ratio": b / t,
        }
    }


def _iqr(values: list[float]) -> float:
    q = statistics.quantiles(values, n=4)
    return q[2] - q[0]


if __name__ == "__main__":
    main()
