"""/healthz and /readyz: unauthenticated, before host checks, 503 naming what is down."""

from __future__ import annotations

import copy

import pytest
from django.db import connections
from django.db.utils import ConnectionHandler

from dashboard import health
from dashboard.runs import dispatch
from dashboard.runs.executor import ExecutorHealth

A_BALANCER = {"HTTP_HOST": "10.1.2.3:8000"}  # an address, not a name in ALLOWED_HOSTS


def test_healthz_answers_anyone_by_address(client):
    response = client.get("/healthz", **A_BALANCER)
    assert response.status_code == 200
    assert response.json() == {"status": "alive"}
    assert response["Cache-Control"] == "no-store"


@pytest.mark.django_db
def test_readyz_names_every_check_when_ready(client):
    response = client.get("/readyz/", **A_BALANCER)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ready" and body["down"] == []
    assert set(body["checks"]) == {"database", "channel_layer", "executor", "duties"}
    assert body["checks"]["database"]["ok"] is True


def test_a_post_to_a_probe_is_refused_without_csrf_trouble(client):
    response = client.post("/readyz", **A_BALANCER)
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"


def dead_database() -> ConnectionHandler:
    """Connections to the test database's engine where no database can be reached (under
    an alias of their own: Django keeps PostgreSQL pools by alias)."""
    settings_dict = copy.deepcopy(connections["default"].settings_dict)
    if connections["default"].vendor == "sqlite":
        settings_dict["NAME"] = "/nonexistent-planwatch-dir/db.sqlite3"
    else:
        settings_dict.update(HOST="127.0.0.1", PORT=1)  # nothing listens on port 1
    # ConnectionHandler insists on a "default"; only "dead" is ever connected
    return ConnectionHandler({"default": settings_dict, "dead": settings_dict})


@pytest.mark.django_db
def test_readyz_is_503_naming_the_database_when_it_cannot_be_reached(client, monkeypatch):
    handler = dead_database()
    real = health.readiness
    monkeypatch.setattr(health, "readiness", lambda: real(database=handler["dead"]))
    try:
        response = client.get("/readyz", **A_BALANCER)
    finally:
        dead = handler["dead"]
        dead.close()
        if getattr(dead, "pool", None) is not None:
            dead.close_pool()
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["down"] == ["database"]
    assert body["checks"]["database"]["error"]


@pytest.mark.django_db
def test_readyz_is_503_naming_the_executor_when_its_loop_is_stuck(client, monkeypatch, settings):
    settings.PLANWATCH = {**settings.PLANWATCH, "EXECUTOR": "inprocess"}
    stuck = ExecutorHealth(alive=True, slots=200, busy=3, beat_age=60.0)
    monkeypatch.setattr(dispatch, "executor_health", lambda: stuck)
    response = client.get("/readyz", **A_BALANCER)
    assert response.status_code == 503
    assert response.json()["down"] == ["executor"]
    assert "stuck" in response.json()["checks"]["executor"]["error"]


def test_langgraphs_ok_answers_anyone_without_asking_the_database(client):
    response = client.get("/langgraph/ok", **A_BALANCER)  # no token: a health route
    assert response.status_code == 200
    assert response.json() == {"ok": True}


@pytest.mark.django_db
def test_langgraphs_ok_with_check_db_and_aegras_health_are_the_readiness_checks(client):
    ok = client.get("/langgraph/ok", {"check_db": "1"}, **A_BALANCER)
    assert ok.status_code == 200
    assert ok.json() == {"ok": True, "services": {
        "database": "healthy", "channel_layer": "healthy", "executor": "healthy",
        "duties": "healthy"}}
    aegras = client.get("/langgraph/health", **A_BALANCER)
    assert aegras.status_code == 200
    assert aegras.json()["status"] == "ready"  # /readyz's answer


@pytest.mark.django_db
def test_langgraphs_ok_with_check_db_is_503_naming_the_check_that_is_down(client, monkeypatch,
                                                                         settings):
    settings.PLANWATCH = {**settings.PLANWATCH, "EXECUTOR": "inprocess"}
    stuck = ExecutorHealth(alive=True, slots=200, busy=3, beat_age=60.0)
    monkeypatch.setattr(dispatch, "executor_health", lambda: stuck)
    ok = client.get("/langgraph/ok", {"check_db": "1"}, **A_BALANCER)
    assert ok.status_code == 503
    assert ok.json() == {"ok": False, "services": {
        "database": "healthy", "channel_layer": "healthy", "executor": "unhealthy",
        "duties": "healthy"}}
    assert client.get("/langgraph/health", **A_BALANCER).status_code == 503
