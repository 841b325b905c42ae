"""Browser clients on another origin (Agent Chat UI, Agent Inbox) may call /langgraph/."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.conftest import api_token

pytestmark = pytest.mark.django_db

UI = "http://localhost:3000"


@pytest.fixture(autouse=True)
def allowed_origin(settings):
    settings.CORS_ALLOWED_ORIGINS = [UI]


def test_a_preflight_from_a_listed_origin_allows_the_api_key_header():
    response = Client().options(
        "/langgraph/threads/search", headers={
            "Origin": UI, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-api-key"})
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == UI
    allowed = response["Access-Control-Allow-Headers"].lower()
    assert "x-api-key" in allowed and "content-type" in allowed
    assert "POST" in response["Access-Control-Allow-Methods"]


def test_a_request_from_a_listed_origin_is_answered_with_its_origin(operator):
    response = Client().get("/langgraph/info", headers={
        "Origin": UI, "x-api-key": api_token(operator)})
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == UI
    assert "content-location" in response["Access-Control-Expose-Headers"].lower()


def test_other_origins_and_the_other_urls_get_no_cors_headers(operator):
    other = Client().get("/langgraph/info", headers={
        "Origin": "http://evil.example", "x-api-key": api_token(operator)})
    assert "Access-Control-Allow-Origin" not in other
    pages = Client().get("/api/graphs/", headers={
        "Origin": UI, "Authorization": f"Token {api_token(operator)}"})
    assert "Access-Control-Allow-Origin" not in pages  # only /langgraph/ is shared
