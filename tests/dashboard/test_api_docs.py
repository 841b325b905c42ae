"""The API docs page renders in Chromium with every asset served by Planwatch itself."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from tests.conftest import login, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_swagger_ui_renders_offline_after_login(live_server_url, page, operator):
    own = urlparse(live_server_url).netloc
    foreign: list[str] = []

    def only_local(route):
        if urlparse(route.request.url).netloc != own:
            foreign.append(route.request.url)
            return route.abort()
        return route.continue_()

    page.route("**/*", only_local)
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.goto(f"{live_server_url}/api/docs/")
    page.wait_for_selector("text=/api/runs/{id}/cancel/", timeout=15_000)
    assert page.locator(".opblock").count() == 20  # one block per operation of the schema
    assert page.locator("text=Planwatch API").first.is_visible()
    screenshot(page, "api-docs")
    assert foreign == []
