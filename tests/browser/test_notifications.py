"""Chromium, granted the notification permission, shows a notification of a new question on
an open dashboard tab once the operator opted in (fed by the inbox badge's websocket)."""

from __future__ import annotations

import json
import time

import pytest
from playwright.sync_api import expect

from dashboard.models import Run
from tests.browser.conftest import accessible
from tests.conftest import login, wait_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Headless Chromium keeps no notification centre to look at: the page's own Notification
# is wrapped so the test reads what the page constructed (the real one is still called).
SPY = """
window.__shown = [];
const Real = window.Notification;
class Seen extends Real {
  constructor(title, options) {
    super(title, options);
    window.__shown.push({title: title, body: (options || {}).body, tag: (options || {}).tag});
  }
}
window.Notification = Seen;
"""


def test_an_opted_in_tab_shows_a_notification_of_a_new_question(live_server_url, page,
                                                                 operator):
    page.context.grant_permissions(["notifications"], origin=live_server_url)
    page.add_init_script(SPY)
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.goto(f"{live_server_url}/inbox/")
    optin = page.get_by_role("button", name="Notify me in this browser")
    optin.click()
    expect(page.get_by_role("button", name="Stop notifying me here")).to_be_visible()
    expect(page.locator("[data-notify-state]")).to_contain_text("appear as notifications")
    accessible(page)
    page.goto(f"{live_server_url}/")  # any dashboard tab: the navigation's socket tells it
    page.locator("#nav-inbox-count").wait_for(state="attached")
    page.wait_for_timeout(500)  # the badge socket is open (the run below asks after it)
    # a run started in the server (its executor asks, its doorbell rings this tab)
    token = json.loads(page.locator("body").get_attribute("hx-headers"))["X-CSRFToken"]
    created = page.evaluate("""async (token) => {
        const r = await fetch('/api/runs/', {method: 'POST', headers: {
            'Content-Type': 'application/json', 'X-CSRFToken': token},
            body: JSON.stringify({graph: 'acquisition', input: {}})});
        return [r.status, await r.json()];
    }""", token)
    assert created[0] == 201, created
    assert wait_run(created[1]["id"]).status == Run.Status.INTERRUPTED
    deadline = time.monotonic() + 20  # (wait_for_function evaluates a string: CSP refuses)
    while not page.evaluate("() => window.__shown.length") and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    (shown,) = page.evaluate("() => window.__shown")
    assert shown["title"] == "Planwatch: a question waits for you"
    assert shown["body"].startswith("acquisition asks: Which region")
    assert shown["tag"].startswith("planwatch-question-")
