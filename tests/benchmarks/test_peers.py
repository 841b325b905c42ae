"""The peers benchmark's own parts: its graph, its reading of the trace, its targets.

The peers' servers are not started here (too slow for ``make test``); ``python -m
benchmarks.peers`` does that.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid

import pytest
from django.template.loader import render_to_string

from benchmarks import peer_graph, peers
from benchmarks.peers_planwatch import SEQ_PATTERNS, run_moments, start_phases
from dashboard import services
from dashboard.models import RunEvent
from planner.registry import load_graphs
from tests.conftest import assert_gapless, wait_run


async def test_the_chain_runs_its_80_nodes_in_order_each_stamping_its_completion():
    updates = [u async for u in peer_graph.graph.astream({"i": -1}, stream_mode="updates")]
    assert [next(iter(u)) for u in updates] == [f"n{i:02d}" for i in range(80)]
    stamps = [next(iter(u.values())) for u in updates]
    assert [s["i"] for s in stamps] == list(range(80))
    assert all(a["t"] <= b["t"] for a, b in itertools.pairwise(stamps))


def test_planwatch_executes_the_registered_chain_and_stores_every_stamp(executor, operator):
    load_graphs(["benchmarks.peer_graph"])  # as PLANWATCH_GRAPH_MODULES does for the bench
    run = services.run_create(graph=peer_graph.NAME, input={}, user=operator)
    run = wait_run(run.id)
    assert run.status == "succeeded"
    finished = [e for e in assert_gapless(run) if e.kind == RunEvent.Kind.NODE_FINISHED]
    assert [e.payload["update"]["i"] for e in finished] == list(range(80))
    assert all(isinstance(e.payload["update"]["t"], float) for e in finished)


def test_a_runs_start_is_timed_from_its_own_rows(executor, operator):
    load_graphs(["benchmarks.peer_graph"])
    asked = time.time()
    run = wait_run(services.run_create(graph=peer_graph.NAME, input={}, user=operator).id)
    moments = run_moments([str(run.id), str(uuid.uuid4())])
    assert list(moments) == [str(run.id)]  # a run that does not exist has no moments
    created, claimed, first_node, first_start = moments[str(run.id)]
    assert asked <= created <= claimed <= first_start <= first_node
    first = RunEvent.objects.filter(run=run, kind=RunEvent.Kind.NODE_FINISHED).order_by("seq")[0]
    assert first_node == first.created_at.timestamp()
    # a run the server did not name (no metadata part) is left out, not counted as 0
    phases = start_phases([(str(run.id), asked), ("", asked)], moments)
    assert phases == {"start_run_row_p50_ms": round((created - asked) * 1000, 2),
                      "start_claimed_p50_ms": round((claimed - asked) * 1000, 2),
                      "start_first_node_row_p50_ms": round((first_node - asked) * 1000, 2)}


def test_the_watcher_reads_each_seq_from_a_trace_row_as_the_consumer_renders_it():
    html = render_to_string("dashboard/_trace_event.html", {
        "run": {"id": uuid.uuid4()},
        "event": {"seq": 4711, "kind": "node_finished", "node": "n07", "payload": {}},
    })
    assert [int(s) for p in SEQ_PATTERNS for s in p.findall(html)] == [4711]


def cell(p50: float, p99: float, rate: float) -> dict[str, float]:
    return {"p50_ms": p50, "p99_ms": p99, "runs_per_s": rate, "nodes": 800}


def test_targets_compare_planwatch_at_10_at_once_with_the_best_peer():
    key = f"concurrent_{peers.CONCURRENCY}"
    result = {
        "planwatch": {key: cell(3.0, 9.0, 8.0)},
        "langgraph-api": {key: cell(10.0, 17.0, 3.7)},
        "aegra": {key: cell(20.0, 40.0, 4.1)},
    }
    met = peers.targets(result)
    # the best peer is the fastest one (runs/s), and its own p99 is the bar
    assert met["latency"] == {"system": "planwatch", "planwatch_p99_ms": 9.0,
                              "paced_runs_per_s": None,
                              "best_peer": "aegra", "best_peer_p99_ms": 40.0, "met": True}
    assert met["throughput"]["best_peer_runs_per_s"] == 4.1
    assert met["throughput"]["met"] is False  # 8.0 < 2 x 4.1
    result["planwatch"][key] = cell(3.0, 41.0, 8.2)
    assert peers.targets(result)["latency"]["met"] is False
    assert peers.targets(result)["throughput"]["met"] is True
    # through the peers' own client, when measured, Planwatch is judged on that row
    result[peers.SDK] = {key: cell(2.0, 30.0, 9.0)}
    assert peers.targets(result)["throughput"]["system"] == peers.SDK
    assert peers.targets(result)["latency"]["met"] is True
    assert "first_update" not in peers.targets(result)
    # measured at the best peer's own rate, that phase's p99 is the one judged
    result[peers.SDK]["paced"] = cell(2.0, 45.0, 4.1)
    judged = peers.targets(result)["latency"]
    assert (judged["planwatch_p99_ms"], judged["paced_runs_per_s"], judged["met"]) == (
        45.0, 4.1, False)
    # run start → first node update: p99 ≤ 20 ms
    result[peers.SDK][key]["first_update_p99_ms"] = 21.0
    assert peers.targets(result)["first_update"]["met"] is False
    result[peers.SDK][key]["first_update_p99_ms"] = 19.0
    assert peers.targets(result)["first_update"]["met"] is True
    # with the runs' own records, the row says where that time went
    assert peers.targets(result)["first_update"]["phases"] == {}
    phases = {"start_run_row_p50_ms": 3.0, "start_claimed_p50_ms": 6.0,
              "start_first_node_row_p50_ms": 9.0}
    result[peers.SDK][key] |= phases | {"first_update_p50_ms": 11.0}
    assert peers.targets(result)["first_update"]["phases"] == {
        key: phases | {"first_update_p50_ms": 11.0}}


def test_percentile_interpolates_and_is_nan_without_values():
    assert peers.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert peers.percentile([5.0], 99) == 5.0
    assert peers.percentile([], 50) != peers.percentile([], 50)  # NaN


@pytest.mark.pg
def test_the_floor_is_measured_and_resolved_as_the_servers_are(monkeypatch):
    """The bare rows go through the same phases and resolution as the servers' rows (a
    one-run measurement of the floor on a database of the test's own)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("the floor keeps its checkpoints in PostgreSQL; this runs in the "
                    "PostgreSQL pass")
    monkeypatch.setattr(peers, "BARE_DB", "planwatch_test_bare_floor")
    monkeypatch.setattr(peers, "WARMUP", 0)
    out = asyncio.run(peers.ameasure_bare(runs=1, per_run=True))
    for mode in ("sequential", f"concurrent_{peers.CONCURRENCY}"):
        assert out[mode]["nodes"] == peer_graph.NODES
        assert out[mode]["first_update_p99_ms"] > 0 and out[mode]["runs_per_s"] > 0
