"""``/metrics`` for Prometheus: this process's instruments, and the database's figures
asked at scrape time.

Multi-process: with ``PROMETHEUS_MULTIPROC_DIR`` set (``manage.py serve --processes N``
sets it for its daphnes; workers on the same host may share it) every scrape sums the
instruments of every live process of that directory (prometheus-client's multiprocess
mode), so whichever process a scrape reaches answers for all of them; per-process gauges
carry a ``pid`` label. Without it a process shows its own instruments. The figures from
the database (runs by status and graph, the queue, questions waiting, heartbeats, model
use by graph) are the same from any process: a few short aggregate statements a scrape.

Who may scrape (:func:`scrape_allowed`): a request with ``Authorization: Bearer
<PLANWATCH_METRICS_TOKEN>``, or from an address in ``PLANWATCH_METRICS_NETWORKS``
(default: loopback only, 127.0.0.0/8 and ::1) when no proxy forwarded it (behind a proxy on
the same host every client would be loopback).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Iterator
from datetime import datetime

from django.db.models import Count, Min, Q, Sum
from django.utils import timezone
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from dashboard import health
from dashboard.models import Interrupt, Run
from dashboard.runs import dispatch, store
from dashboard.runs.conf import planwatch_setting

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


PROXY_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Real-IP")
"""Headers a proxy adds: a request carrying one came through a proxy, whose own address
(loopback, for a proxy on the same host) says nothing of the client's."""


def scrape_allowed(*, authorization: str, remote_addr: str, forwarded: bool = False) -> bool:
    """Whether a scrape with this ``Authorization`` header from this address is let in
    (``forwarded``: it came through a proxy, so only the token lets it in)."""
    token = str(planwatch_setting("METRICS_TOKEN"))
    if token:
        scheme, _, given = authorization.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(),
                                                              token.encode()):
            return True
    if forwarded:
        return False
    try:
        address = ipaddress.ip_address(remote_addr)
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(net, strict=False)
               for net in planwatch_setting("METRICS_NETWORKS"))


def _age(then: datetime | None, now: datetime) -> float:
    return 0.0 if then is None else max(0.0, (now - then).total_seconds())


class DatabaseCollector(Collector):
    """What the database knows, asked once a scrape (the same from every process)."""

    NAMES = ("planwatch_runs", "planwatch_runs_finished", "planwatch_graph_model_calls",
             "planwatch_graph_model_tokens",
             "planwatch_graph_model_cost_usd", "planwatch_runs_queued",
             "planwatch_queue_oldest_wait_seconds", "planwatch_questions_waiting",
             "planwatch_questions_oldest_wait_seconds",
             "planwatch_running_oldest_heartbeat_age_seconds", "planwatch_running_stale",
             "planwatch_workers_alive")

    def describe(self) -> Iterator[Metric]:
        """The metrics' names, without asking the database (registering calls this)."""
        for name in self.NAMES:
            yield GaugeMetricFamily(name, "")

    def collect(self) -> Iterator[Metric]:
        """Runs by status and graph, finished runs by outcome, with their model use (one
        GROUP BY), the queue,
        questions waiting, running runs' heartbeats, procrastinate workers."""
        now = timezone.now()
        runs = GaugeMetricFamily("planwatch_runs", "Runs in the database, by graph and status.",
                                 labels=["graph", "status"])
        finished = GaugeMetricFamily(
            "planwatch_runs_finished", "Finished runs in the database, by graph and outcome "
            "(as stored when each stopped: a failed plan is plan_failed, though its status is "
            "succeeded).", labels=["graph", "outcome"])
        by_status: dict[tuple[str, str], int] = {}
        calls = GaugeMetricFamily("planwatch_graph_model_calls",
                                  "Model calls of the runs in the database, by graph.",
                                  labels=["graph"])
        tokens = GaugeMetricFamily("planwatch_graph_model_tokens",
                                   "Tokens of the runs in the database, by graph and direction.",
                                   labels=["graph", "direction"])
        cost = GaugeMetricFamily("planwatch_graph_model_cost_usd",
                                 "Cost in USD of the runs in the database, by graph.",
                                 labels=["graph"])
        per_graph: dict[str, dict[str, float]] = {}
        queued, oldest_queued = 0, None
        rows = (Run.objects.order_by().values("graph", "status", "outcome")
                .annotate(n=Count("id"), oldest=Min("created_at"), calls=Sum("model_calls"),
                          input=Sum("input_tokens"), output=Sum("output_tokens"),
                          cost=Sum("cost_usd")))
        for row in rows:
            key = (row["graph"], row["status"])
            by_status[key] = by_status.get(key, 0) + row["n"]
            if row["outcome"]:
                finished.add_metric([row["graph"], row["outcome"]], row["n"])
            sums = per_graph.setdefault(row["graph"], dict.fromkeys(
                ("calls", "input", "output", "cost"), 0.0))
            sums["calls"] += row["calls"] or 0
            sums["input"] += row["input"] or 0
            sums["output"] += row["output"] or 0
            sums["cost"] += row["cost"] or 0
            if row["status"] == Run.Status.QUEUED:
                queued += row["n"]
                if oldest_queued is None or row["oldest"] < oldest_queued:
                    oldest_queued = row["oldest"]
        for (graph, status), n in by_status.items():
            runs.add_metric([graph, status], n)
        for graph, sums in per_graph.items():
            calls.add_metric([graph], sums["calls"])
            tokens.add_metric([graph, "input"], sums["input"])
            tokens.add_metric([graph, "output"], sums["output"])
            cost.add_metric([graph], sums["cost"])
        yield from (runs, finished, calls, tokens, cost)
        yield GaugeMetricFamily("planwatch_runs_queued", "Runs waiting for an executor.",
                                value=queued)
        yield GaugeMetricFamily("planwatch_queue_oldest_wait_seconds",
                                "How long the oldest queued run has waited.",
                                value=_age(oldest_queued, now))
        waiting = Interrupt.objects.filter(status=Interrupt.Status.PENDING).aggregate(
            n=Count("id"), oldest=Min("created_at"))
        yield GaugeMetricFamily("planwatch_questions_waiting",
                                "Questions (interrupts) waiting for an answer.", value=waiting["n"])
        yield GaugeMetricFamily("planwatch_questions_oldest_wait_seconds",
                                "How long the oldest waiting question has waited.",
                                value=_age(waiting["oldest"], now))
        stale = store.stale_before(now)
        beats = Run.objects.running().aggregate(
            oldest=Min("heartbeat_at"), stale=Count("id", filter=Q(heartbeat_at__lt=stale)))
        yield GaugeMetricFamily("planwatch_running_oldest_heartbeat_age_seconds",
                                "Age of the oldest heartbeat of a running run.",
                                value=_age(beats["oldest"], now))
        yield GaugeMetricFamily("planwatch_running_stale",
                                "Running runs whose executor stopped heart-beating (to be "
                                "taken over).", value=beats["stale"])
        if not dispatch.in_process():
            alive = health.workers_seen()[0]
            if alive is not None:
                yield GaugeMetricFamily("planwatch_workers_alive",
                                        "procrastinate workers with a recent heartbeat.",
                                        value=alive)


_DATABASE = DatabaseCollector()
REGISTRY.register(_DATABASE)  # the single-process registry: this process's own instruments


def scrape() -> bytes:
    """The exposition text of every metric (see the module's docstring)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        registry.register(_DATABASE)
        return generate_latest(registry)
    return generate_latest(REGISTRY)
