"""A run's outcome is decided once, when it stops, and stored: a failed plan (its graph
returned, its output says the goal failed) reads failed on every surface, beside the
execution status LangGraph's clients know."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from dashboard import services
from dashboard.lgserver import shapes
from dashboard.models import Run, Thread
from dashboard.runs import otel, store
from dashboard.runs.outcome import Outcome, outcome_decide
from dashboard.web.presentation import trace
from planner.registry import get_graph
from tests.conftest import wait_run

DECOMPOSITION = get_graph("decomposition")


@pytest.fixture
def failed_plan(executor, operator):
    run = wait_run(services.run_create(graph="decomposition", input={
        "inject_failure": "worker_error", "max_retries": 0}, user=operator).id)
    assert run.status == Run.Status.SUCCEEDED and run.output["status"] == "failed"
    return run


def _root_span(run, monkeypatch):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans, ids = InMemorySpanExporter(), otel._Ids()
    provider = TracerProvider(id_generator=ids)  # type: ignore[arg-type]
    provider.add_span_processor(SimpleSpanProcessor(spans))
    monkeypatch.setattr(otel, "_tracer", lambda: (provider, provider.get_tracer("t"), ids))
    otel.export_run(run.id, after=0, upto=run.last_seq)
    (root,) = [s for s in spans.get_finished_spans() if s.parent is None]
    return root


def test_a_failed_plan_reads_failed_on_every_surface(failed_plan, operator, client,
                                                     monkeypatch):
    run = failed_plan
    reason = run.output["reason"]
    assert reason and (run.outcome, run.outcome_reason) == (Outcome.PLAN_FAILED, reason)
    client.force_login(operator)

    # the trace page
    page = client.get(f"/runs/{run.id}/").content.decode()
    live = page[page.index('id="trace-live"'):page.index('id="trace-actions"')]
    assert 'class="badge outcome-failed" role="status"' in live
    assert "Finished \u2014 plan failed" in live and ">Succeeded<" not in live
    card = page[page.index('id="trace-result"') - 80:page.index('id="trace-result-title"')]
    assert "result-goal-failed" in card  # the result card is red-edged, not green
    fold, _ = trace.trace_fold(run=run)
    last = list(fold.timeline.rows.values())[-1]
    assert (last.title, last.status) == ("Run finished \u2014 plan failed", "failed")
    # its replay, at its last event (a run_succeeded): the stored outcome, as live
    replay = client.get(f"/runs/{run.id}/?at={run.last_seq}").content.decode()
    replayed = replay[replay.index('id="trace-live"'):replay.index('id="trace-actions"')]
    assert "Finished \u2014 plan failed" in replayed and ">Succeeded<" not in replayed
    before = client.get(f"/runs/{run.id}/?at={run.last_seq - 1}").content.decode()
    assert "plan failed" not in before[before.index('id="trace-live"'):
                                       before.index('id="trace-actions"')]

    # the runs list: its badge, and its "Status = Failed" and outcome filters
    short = str(run.id)[:8]
    assert "Finished \u2014 plan failed" in client.get("/").content.decode()
    assert short in client.get("/?status=failed").content.decode()
    assert short not in client.get("/?status=succeeded").content.decode()
    assert short in client.get("/?outcome=plan_failed").content.decode()
    assert short not in client.get("/?outcome=succeeded").content.decode()

    # /api/: the execution status stays, the outcome beside it, filterable
    detail = client.get(f"/api/runs/{run.id}/").json()
    assert detail["status"] == "succeeded"  # the graph did return
    assert (detail["outcome"], detail["outcome_reason"]) == ("plan_failed", reason)
    listed = [r["id"] for r in client.get("/api/runs/?outcome=plan_failed").json()["results"]]
    assert listed == [str(run.id)]
    assert client.get("/api/runs/?outcome=succeeded").json()["results"] == []

    # the export
    header = json.loads(b"".join(client.get(f"/api/runs/{run.id}/export/")))["header"]
    assert (header["outcome"], header["outcome_reason"]) == ("plan_failed", reason)

    # OTLP: the root span is an error, with the reason
    from opentelemetry.trace import StatusCode

    root = _root_span(run, monkeypatch)
    assert root.status.status_code == StatusCode.ERROR
    assert reason in root.status.description
    assert root.attributes["planwatch.outcome"] == "plan_failed"

    # /metrics: finished runs by outcome
    scraped = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(
                   client.get("/metrics").content.decode()) for s in family.samples}
    assert scraped[("planwatch_runs_finished",
                    (("graph", "decomposition"), ("outcome", "plan_failed")))] == 1
    assert ("planwatch_runs_finished",
            (("graph", "decomposition"), ("outcome", "succeeded"))) not in scraped

    # the LangGraph API: its run's status stays success, its thread is in error, both
    # carry the outcome; the chat transcript ends with a message saying it failed and why
    lg_run = shapes.run(run.current_langgraph_run())
    assert lg_run["status"] == "success"
    assert lg_run["metadata"]["planwatch_outcome"] == {"outcome": "plan_failed",
                                                       "reason": reason}
    thread = shapes.thread(Thread.objects.get(id=run.conversation_id))
    assert thread["status"] == "error"
    assert thread["metadata"]["planwatch_outcome"]["outcome"] == "plan_failed"
    said = thread["values"]["messages"][-1]
    assert said["type"] == "ai" and said["content"].startswith("The plan failed")
    assert reason in said["content"]


def test_a_cancel_s_outcome_names_who_and_a_budget_s_names_its_figure(operator, executor):
    run = services.run_create(graph="decomposition", input={"goal": "x" * 20},
                              user=operator)
    services.run_cancel(run=run, user=operator, reason="wrong goal")
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert (run.outcome, run.outcome_reason) == (Outcome.CANCELLED,
                                                 f"cancelled by {operator.username}: wrong goal")
    # the budget engineer's contract: a budget ends a run through the cancel path, its
    # closing event's payload naming the budget
    fields = store.finish(status="cancelled", current="running", now=timezone.now(),
                          closing={"by": "", "budget": {"kind": "tokens", "limit": 10000,
                                                        "used": 12400}})
    assert (fields["outcome"], fields["outcome_reason"]) == (
        "budget_exceeded", "tokens budget exceeded: 12,400 used of 10,000")
    assert store.thread_status(fields) == "error"


@pytest.mark.parametrize(("state", "output", "error", "closing", "expected"), [
    ("succeeded", {"status": "done"}, "", None, ("succeeded", "")),
    ("succeeded", {"status": "failed", "reason": "task t2 failed"}, "", None,
     ("plan_failed", "task t2 failed")),
    ("succeeded", {"status": "failed"}, "", None, ("plan_failed", "plan failed")),
    ("failed", None, "ValueError: boom", None, ("failed", "ValueError: boom")),
    ("cancelled", None, "", {"reason": "cancelled", "by": "ann"}, ("cancelled",
                                                                   "cancelled by ann")),
    ("cancelled", None, "", {"by": "ann", "budget": {"kind": "cost_usd", "limit": 0.5,
                                                     "used": 0.5123}},
     ("budget_exceeded", "cost_usd budget exceeded: 0.5123 used of 0.5")),
    ("cancelled", None, "", {"budget": {"kind": "cost_usd", "limit": 12000.0, "used": 12000.25}},
     ("budget_exceeded", "cost_usd budget exceeded: 12,000.25 used of 12,000")),
])
def test_outcome_decide(state, output, error, closing, expected):
    assert outcome_decide(state=state, spec=DECOMPOSITION, output=output, error=error,
                          closing=closing) == expected


def test_outcome_decide_refuses_a_state_that_is_not_final():
    with pytest.raises(ValueError, match="'running' is not a final state"):
        outcome_decide(state="running", spec=None)
