"""Pages around the dashboard: error pages with navigation, the favicon, offline Redoc."""

from __future__ import annotations

import re

import pytest

from dashboard import services

pytestmark = pytest.mark.django_db


def test_not_found_and_not_allowed_pages_are_styled_and_lead_back(executor, client, operator,
                                                                   viewer):
    client.force_login(viewer)
    missing = client.get("/runs/00000000-0000-0000-0000-000000000000/")
    html = missing.content.decode()
    assert missing.status_code == 404 and "Not found" in html
    assert 'href="/"' in html and "planwatch/app.css" in html
    run = services.run_create(graph="test.echo", input={"steps": 1}, user=operator)
    refused = client.post(f"/runs/{run.id}/cancel/")
    html = refused.content.decode()
    assert refused.status_code == 403 and "Not allowed" in html and 'href="/"' in html
    assert "cancel runs" in html  # the reason: which permission was missing


def test_the_favicon_is_answered_without_signing_in(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("favicon.svg")


def test_redoc_fetches_nothing_from_the_internet_and_runs_no_inline_script(client, operator):
    client.force_login(operator)
    html = client.get("/api/redoc/").content.decode()
    assert "https://" not in html and "fonts.googleapis" not in html
    assert not re.search(r"<script>(?!</script>)", html) and "<style" not in html
    assert "redoc.standalone.js" in html


def test_the_server_error_page_renders_without_a_request_and_leads_back():
    from django.template.loader import render_to_string

    html = render_to_string("500.html")  # Django renders it with no context at all
    assert "Something broke on the server" in html and 'href="/"' in html
