"""A run whose graph returned but whose goal failed (a decomposition whose worker failed) is
shown failed everywhere, beside LangGraph's own status."""

from __future__ import annotations

import json

import pytest

from dashboard import services
from dashboard.models import Run
from dashboard.runs import otel
from dashboard.web.presentation import trace
from tests.conftest import wait_run


@pytest.fixture
def failed_plan(executor, operator):
    run = wait_run(services.run_create(graph="decomposition", input={
        "inject_failure": "worker_error", "max_retries": 0}, user=operator).id)
    assert run.status == Run.Status.SUCCEEDED and run.output["status"] == "failed"
    return run


def test_a_failed_plan_is_not_shown_as_succeeded_anywhere(failed_plan, operator, client,
                                                          monkeypatch):
    run = failed_plan
    client.force_login(operator)
    page = client.get(f"/runs/{run.id}/").content.decode()
    live = page[page.index('id="trace-live"'):page.index('id="trace-actions"')]
    assert 'class="badge outcome-failed" role="status"' in live
    assert "Finished \u2014 plan failed" in live and ">Succeeded<" not in live
    card = page[page.index('id="trace-result"') - 80:page.index('id="trace-result-title"')]
    assert "result-goal-failed" in card  # the result card is red-edged, not green
    # the worker that returned the failed task is red in the timeline and the waterfall
    fold, _ = trace.trace_fold(run=run)
    assert any(r.status == "failed" for r in fold.timeline.rows.values())
    assert any(s.status == "failed" for s in fold.waterfall.items)
    # and the run's own last row says how it ended, not "Run succeeded"
    last = list(fold.timeline.rows.values())[-1]
    assert (last.title, last.status) == ("Run finished \u2014 plan failed", "failed")
    timeline = page[page.index('id="trace-timeline"'):page.index('id="timeline-new"')]
    assert "Run succeeded" not in timeline and "Run finished \u2014 plan failed" in timeline
    waterfall = page[page.index('id="trace-waterfall"'):page.index('id="waterfall-detail"')]
    assert "wf-s-failed" in waterfall and "wf-s-err" in waterfall

    listed = client.get("/").content.decode()
    assert "Finished \u2014 plan failed" in listed
    failed = client.get("/?outcome=failed").content.decode()
    achieved = client.get("/?outcome=achieved").content.decode()
    assert str(run.id)[:8] in failed and str(run.id)[:8] not in achieved

    detail = client.get(f"/api/runs/{run.id}/").json()
    assert detail["status"] == "succeeded"  # the graph did return
    assert detail["outcome"]["outcome"] == "failed"
    assert detail["outcome"]["label"] == "plan failed" and detail["outcome"]["reason"]
    assert json.loads(b"".join(client.get(f"/api/runs/{run.id}/export/")))["header"]["outcome"] == (
        detail["outcome"])

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    spans, ids = InMemorySpanExporter(), otel._Ids()
    provider = TracerProvider(id_generator=ids)  # type: ignore[arg-type]
    provider.add_span_processor(SimpleSpanProcessor(spans))
    monkeypatch.setattr(otel, "_tracer", lambda: (provider, provider.get_tracer("t"), ids))
    otel.export_run(run.id, after=0, upto=run.last_seq)
    (root,) = [s for s in spans.get_finished_spans() if s.parent is None]
    assert root.status.status_code == StatusCode.ERROR
    assert root.attributes["planwatch.outcome"] == "plan failed"


def test_langgraph_s_api_keeps_its_status_with_the_outcome_beside(failed_plan, operator,
                                                                  client):
    from dashboard.lgserver import shapes

    shaped = shapes.run(failed_plan.current_langgraph_run())
    assert shaped["status"] == "success"
    assert shaped["metadata"]["planwatch_outcome"]["label"] == "plan failed"
