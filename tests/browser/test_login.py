"""A real Chromium signs in through the login form and sees the runs page."""

from __future__ import annotations

import pytest

from tests.conftest import login, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_login_form_leads_to_the_runs_page(live_server_url, page, operator):
    page.goto(f"{live_server_url}/")
    assert page.url.startswith(f"{live_server_url}/accounts/login/")
    screenshot(page, "login")
    login(page, live_server_url, "olga", "pw-olga-1234")
    assert page.locator("h1").inner_text() == "Runs"
    assert page.locator("text=No runs yet").is_visible()
    screenshot(page, "runs-empty")
