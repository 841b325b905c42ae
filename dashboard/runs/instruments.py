"""This process's Prometheus instruments: what the engine and the streams count as they go.

Counted where the thing happens (a run takes a slot, the run store writes events, a model
call ends, a stream opens); read by ``/metrics`` (:mod:`dashboard.metrics`). With
``PROMETHEUS_MULTIPROC_DIR`` set (``manage.py serve --processes N`` sets it), prometheus-client
keeps each process's values in files there and any process's ``/metrics`` sums them
(gauges per process: ``liveall``, a dead process's removed); without it, a process shows
its own. What the database knows (runs by status, queue, questions, heartbeats) is not
counted here but asked at scrape time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

RUNS_IN_FLIGHT = Gauge(
    "planwatch_process_runs_in_flight", "Runs this process's executor holds in a slot now.",
    multiprocess_mode="liveall")
EXECUTOR_SLOTS = Gauge(
    "planwatch_process_executor_slots", "Runs this process's executor may hold at once.",
    multiprocess_mode="liveall")
EXECUTOR_HEARTBEAT = Gauge(
    "planwatch_process_executor_heartbeat_timestamp_seconds",
    "When this process's executor's heartbeat loop last went round (Unix time).",
    multiprocess_mode="liveall")
STREAMS_OPEN = Gauge(
    "planwatch_process_streams_open",
    "Streams (LangGraph SSE responses, trace websockets) this process holds open.",
    multiprocess_mode="liveall")
EVENT_WRITE_SECONDS = Histogram(
    "planwatch_event_write_seconds",
    "Seconds one write of the run store took (one statement for many runs' events).",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0))
EVENT_DELIVERY_SECONDS = Histogram(
    "planwatch_event_delivery_seconds",
    "Seconds from an event's write to its sending on a LangGraph client's SSE stream.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
QUESTION_ANSWER_SECONDS = Histogram(
    "planwatch_question_answer_seconds",
    "Seconds from a question (interrupt) being asked to its answer.",
    buckets=(1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600))
EVENTS_WRITTEN = Counter(
    "planwatch_events_written", "Run events written to the database.")
MODEL_CALLS = Counter(
    "planwatch_model_calls", "Model calls finished, by model.", ["model"])
MODEL_TOKENS = Counter(
    "planwatch_model_tokens", "Tokens the model reported, by model and direction.",
    ["model", "direction"])
BUDGET_TRIPS = Counter(
    "planwatch_budget_trips", "Budgets reached (the run paused or stopped), by budget and "
    "action.", ["budget", "action"])
MODEL_COST = Counter(
    "planwatch_model_cost_usd", "Cost of model calls in USD (priced models), by model.",
    ["model"])


@contextmanager
def event_write(rows: int) -> Iterator[None]:
    """Time one write of the run store carrying ``rows`` events."""
    began = time.perf_counter()
    yield
    EVENT_WRITE_SECONDS.observe(time.perf_counter() - began)
    if rows:
        EVENTS_WRITTEN.inc(rows)


def event_delivered(written_at: str | None) -> None:
    """Time one event's delivery to a stream's client, from its write (ISO 8601)."""
    if written_at:
        EVENT_DELIVERY_SECONDS.observe(
            max(0.0, time.time() - datetime.fromisoformat(written_at).timestamp()))


def model_call(model: str | None, usage: dict[str, Any] | None,
               cost: dict[str, Any] | None) -> None:
    """Count one finished model call with its tokens and cost (as reported)."""
    name = model or "unknown"
    MODEL_CALLS.labels(model=name).inc()
    for direction in ("input", "output"):
        tokens = (usage or {}).get(f"{direction}_tokens")
        if isinstance(tokens, int) and tokens > 0:
            MODEL_TOKENS.labels(model=name, direction=direction).inc(tokens)
    if cost and isinstance(cost.get("total"), int | float) and cost["total"] > 0:
        MODEL_COST.labels(model=name).inc(cost["total"])
