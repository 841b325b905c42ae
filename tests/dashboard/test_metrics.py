"""/metrics: Prometheus's exposition of a real run, its events and its model tokens; who
may scrape it."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dashboard import services
from dashboard.models import Run
from tests.conftest import wait_run
from tests.openai_server import MODEL

pytestmark = pytest.mark.pg


def scrape(client, **extra) -> dict[tuple[str, tuple], float]:
    """Every sample of ``/metrics``: (name, sorted labels) -> value."""
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.content.decode())
            for s in family.samples}


def test_a_scrape_during_a_run_shows_the_run_its_events_and_its_model_tokens(
        on_test_model, operator, client):
    before = scrape(client)
    run = wait_run(services.run_create(graph="acquisition", input={
        "region": "Germany", "currency": "EUR"}, user=operator).id)
    assert run.status == Run.Status.INTERRUPTED  # in flight: waiting on the price question
    after = scrape(client)

    def grew(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert after[("planwatch_runs", (("graph", "acquisition"), ("status", "interrupted")))] == 1
    assert after[("planwatch_questions_waiting", ())] == 1
    assert grew("planwatch_events_written_total") >= run.last_seq > 0
    assert grew("planwatch_event_write_seconds_count") >= 1
    assert grew("planwatch_model_calls_total", model=MODEL) == 1
    assert grew("planwatch_model_tokens_total", model=MODEL, direction="input") == 120
    assert grew("planwatch_model_tokens_total", model=MODEL, direction="output") == 30
    assert after[("planwatch_graph_model_tokens",
                  (("direction", "input"), ("graph", "acquisition")))] == 120
    assert after[("planwatch_process_executor_slots", ())] > 0
    assert ("planwatch_process_runs_in_flight", ()) in after

    services.interrupt_answer(interrupt=run.interrupts.get(), answer="40", user=operator)
    answered = scrape(client)
    key = ("planwatch_question_answer_seconds_count", ())
    assert answered[key] - before.get(key, 0.0) == 1  # the time to answer, observed once


@pytest.mark.django_db
def test_metrics_are_refused_off_loopback_without_the_token(client, settings):
    settings.PLANWATCH = {**settings.PLANWATCH, "METRICS_TOKEN": "s3cret-scrape"}
    outside = {"REMOTE_ADDR": "10.0.0.7"}
    refused = client.get("/metrics", **outside)
    assert refused.status_code == 403
    assert "PLANWATCH_METRICS_TOKEN" in refused.json()["detail"]
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope", **outside)
    assert wrong.status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape",
                      **outside).status_code == 200
    assert client.get("/metrics").status_code == 200  # loopback, by default


@pytest.mark.django_db
def test_metrics_networks_let_a_scraper_in_by_address(client, settings):
    settings.PLANWATCH = {**settings.PLANWATCH, "METRICS_NETWORKS": ["10.0.0.0/8"]}
    assert client.get("/metrics", REMOTE_ADDR="10.2.3.4").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.9").status_code == 403
    assert client.get("/metrics").status_code == 403  # loopback is no longer listed


@pytest.mark.django_db
@pytest.mark.parametrize("header", ["HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP"])
def test_a_request_a_proxy_forwarded_needs_the_token_though_the_proxy_is_loopback(
        client, settings, header):
    """A proxy on the same host makes every client loopback: what it forwarded is let in
    by the token alone."""
    settings.PLANWATCH = {**settings.PLANWATCH, "METRICS_TOKEN": "s3cret-scrape"}
    refused = client.get("/metrics", **{header: "203.0.113.9"})
    assert refused.status_code == 403
    assert "forwarded needs the token" in refused.json()["detail"]
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape",
                      **{header: "203.0.113.9"}).status_code == 200
