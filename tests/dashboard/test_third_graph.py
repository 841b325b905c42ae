"""A graph the dashboard has never heard of is startable, traceable and answerable.

``tests/dashboard/survey_graph.py`` declares everything on its ``GraphSpec``: its input
field, its own question kind with its own check, its result card. Nothing in dashboard/
knows it.
"""

from __future__ import annotations

import tests.dashboard.survey_graph  # noqa: F401  (registers test.survey)
from dashboard.models import Interrupt, Run, RunEvent
from tests.conftest import assert_gapless, wait_run


def test_a_third_graph_is_started_traced_and_answered_through_the_pages(
        executor, operator, client):
    client.force_login(operator)
    form = client.get("/runs/new/?graph=test.survey").content.decode()
    assert 'name="topic"' in form
    refused = client.post("/runs/new/", {"graph": "test.survey", "topic": "x" * 81})
    assert refused.status_code == 400 and "keep it to 80" in refused.content.decode()
    started = client.post("/runs/new/", {"graph": "test.survey", "topic": "tea"})
    assert started.status_code == 302
    run = wait_run(Run.objects.get().id)
    assert run.status == Run.Status.INTERRUPTED
    question = run.interrupts.get()
    trace = client.get(f"/runs/{run.id}/")
    assert trace.status_code == 200 and "test.survey" in trace.content.decode()

    answers = client.get(f"/runs/{run.id}/interrupts/").content.decode()
    assert "Rate tea" in answers and "1 to 5, or stars like ***" in answers
    prefix = f"i{question.pk}"
    bad = client.post(f"/runs/{run.id}/interrupts/", {f"{prefix}-answer": "7"})
    assert bad.status_code == 422
    assert "&#x27;7&#x27; is no rating; give 1 to 5" in bad.content.decode()
    assert Interrupt.objects.get(pk=question.pk).status == Interrupt.Status.PENDING
    ok = client.post(f"/runs/{run.id}/interrupts/", {f"{prefix}-answer": "****"})
    assert ok.status_code == 302  # a plain form post goes back to the trace
    run = wait_run(run.id, statuses=("succeeded", "failed", "cancelled"))
    assert run.status == Run.Status.SUCCEEDED and run.output == {"topic": "tea", "rating": 4}
    events = assert_gapless(run)
    assert {"ask", "verdict"} <= {e.node for e in events if e.kind == RunEvent.Kind.NODE_FINISHED}
    succeeded = events[-1]
    assert succeeded.kind == RunEvent.Kind.RUN_SUCCEEDED
    assert succeeded.payload == {"output": {"topic": "tea", "rating": 4}}


def test_a_third_graph_through_the_api_refuses_unknown_fields_like_every_graph(
        executor, operator, client):
    client.force_login(operator)
    response = client.post("/api/runs/", {"graph": "test.survey",
                                          "input": {"topic": "tea", "colour": "red"}},
                           content_type="application/json")
    assert response.status_code == 400
    assert response.json()["errors"]["__all__"] == (
        "unknown input field(s) 'colour'; accepted fields: topic")
    assert Run.objects.count() == 0
