"""Every page sits behind login; the login page and the runs page render."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_anonymous_request_to_runs_page_redirects_to_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"


def test_login_page_renders_a_form(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="username"' in html and 'name="password"' in html
    assert "csrfmiddlewaretoken" in html


def test_wrong_password_is_refused_with_a_message(client, operator):
    response = client.post("/accounts/login/", {"username": "olga", "password": "nope"})
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()


def test_login_then_runs_page_with_navigation(client, operator):
    response = client.post("/accounts/login/",
                           {"username": "olga", "password": "pw-olga-1234"})
    assert response.status_code == 302 and response["Location"] == "/"
    page = client.get("/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "<h1>Runs</h1>" in html
    assert "No runs yet" in html
    assert "olga" in html and "Log out" in html
    # CSRF travels with every htmx request from the body's hx-headers
    assert 'hx-headers=\'{"X-CSRFToken": "' in html


def test_logout_is_a_post_and_ends_the_session(client, operator):
    client.force_login(operator)
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_admin_requires_staff(client, operator):
    client.force_login(operator)
    response = client.get("/admin/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
