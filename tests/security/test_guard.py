"""Crafted input gets a 400 that names the problem, never a 500; websockets are gated.

Each case below answered 500 before ``dashboard.web.middleware`` (a NUL or a lone surrogate the
database cannot store, a nesting the JSON parser cannot follow, a path no websocket route
knows) or opened a socket from another port.
"""

from __future__ import annotations

import json
import os

import pytest
from channels.testing import WebsocketCommunicator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dashboard.models import Interrupt, Run
from tests.conftest import wait_run

JSON = "application/json"

pytestmark = pytest.mark.reliability


@pytest.fixture
def pending(executor, operator):
    from dashboard import services

    run = wait_run(services.run_create(graph="test.echo", input={"steps": 2, "ask": True},
                                       user=operator).id)
    assert run.status == Run.Status.INTERRUPTED
    return run.interrupts.get()


def _cases(run_id, interrupt_id):
    deep = "[" * 50_000 + "]" * 50_000
    return [
        ("post", "/api/runs/", '{"graph": "test.echo", "input": {"steps": "a\\u0000b"}}'),
        ("post", f"/api/interrupts/{interrupt_id}/answer/", '{"answer": "a\\u0000b"}'),
        ("post", f"/api/interrupts/{interrupt_id}/answer/", '{"answer": "\\ud800"}'),
        ("post", "/api/runs/", '{"graph": "test.echo", "input": {"\\udfff": 1}}'),
        ("post", "/api/runs/", f'{{"graph": "test.echo", "input": {deep}}}'),
        ("get", "/?graph=%00", None),
        ("get", f"/runs/{run_id}/state/?checkpoint=%00", None),
        ("get", "/admin/dashboard/run/?graph=%00", None),
        ("get", "/admin/dashboard/run/%00/change/", None),
        ("get", "/api/runs/?graph=%00", None),
    ]


def test_crafted_input_is_a_400_naming_the_problem(pending, client, admin_user):
    client.force_login(admin_user)
    for method, url, body in _cases(pending.run_id, pending.pk):
        if method == "post":
            response = client.post(url, body, content_type=JSON)
        else:
            response = client.get(url)
        text = response.content.decode()
        assert response.status_code == 400, (url, response.status_code, text[:300])
        assert ("NUL character" in text or "lone surrogate" in text
                or "nests deeper than 100" in text), (url, text[:300])
    assert Interrupt.objects.get(pk=pending.pk).status == Interrupt.Status.PENDING
    assert Run.objects.count() == 1


def test_a_form_field_with_a_nul_is_refused_and_nothing_is_answered(pending, client, operator):
    client.force_login(operator)
    response = client.post(f"/runs/{pending.run_id}/interrupts/",
                           {f"i{pending.pk}-answer": "a\x00b"})
    # a urlencoded form is refused by the guard (400); a multipart one by the form's own
    # null-character check (422 inline): either way a refusal that says why
    assert response.status_code in (400, 422)
    assert "Null characters are not allowed" in response.content.decode() \
        or "NUL character" in response.content.decode()
    assert Interrupt.objects.get(pk=pending.pk).status == Interrupt.Status.PENDING


TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(goal=TEXT, answer=TEXT, query=TEXT)
def _fuzz(client, run_id, interrupt_id, goal, answer, query):
    statuses = [
        client.post("/api/runs/", json.dumps({"graph": "test.echo", "input": {"note": goal}}),
                    content_type=JSON).status_code,
        client.post(f"/api/interrupts/{interrupt_id}/answer/",
                    json.dumps({"answer": answer}), content_type=JSON).status_code,
        client.get("/", {"graph": query}).status_code,
        client.post("/runs/new/", {"graph": "test.echo", "steps": goal}).status_code,
        client.get(f"/runs/{run_id}/state/", {"checkpoint": query}).status_code,
    ]
    assert all(s < 500 for s in statuses), statuses


def test_random_text_anywhere_never_gives_a_server_error(pending, client, operator):
    client.force_login(operator)
    Interrupt.objects.filter(pk=pending.pk).update(status=Interrupt.Status.CANCELLED)
    _fuzz(client, pending.run_id, pending.pk)


async def _connect(path: str, origin: str, host: str = "127.0.0.1:8000"):
    from config.asgi import application

    communicator = WebsocketCommunicator(
        application, path, headers=[(b"origin", origin.encode()), (b"host", host.encode())])
    connected, code = await communicator.connect()
    message = await communicator.receive_output(5) if connected else {"code": code}
    await communicator.disconnect()
    return message


@pytest.mark.django_db(transaction=True)
async def test_a_socket_from_another_port_is_refused():
    closed = await _connect("/ws/runs/", "http://127.0.0.1:9999")
    assert closed.get("code") == 4403
    own = await _connect("/ws/runs/", "http://127.0.0.1:8000")  # anonymous: refused later
    assert own.get("code") == 4401


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/ws/nope/", "/ws/runs/not-a-uuid/"])
async def test_a_socket_to_no_route_is_closed_with_a_code(path):
    closed = await _connect(path, "http://127.0.0.1:8000")
    assert closed.get("code") == 4404


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/accounts/password_reset/", "/accounts/reset/done/",
                                 "/accounts/password_reset/done/"])
def test_there_is_no_e_mailed_password_reset(client, django_user_model, url):
    client.force_login(django_user_model.objects.create_user("x", password="pw-x-12345678"))
    assert client.get(url).status_code == 404


def test_deleting_a_user_keeps_who_started_and_answered(executor, django_user_model, client):
    from django.contrib.auth.models import Permission

    from dashboard import services

    olga = django_user_model.objects.create_user("olga2", password="pw-olga-12345")
    olga.user_permissions.set(Permission.objects.filter(codename__in=["start_run",
                                                                      "answer_interrupt"]))
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 2, "ask": True},
                                       user=olga).id)
    question = run.interrupts.get()
    services.interrupt_answer(interrupt=question, answer="yes", user=olga)
    wait_run(run.id, statuses=("succeeded", "failed"))
    olga.delete()
    run.refresh_from_db()
    question.refresh_from_db()
    assert run.created_by is None and run.creator_name == "olga2"
    assert question.answered_by is None and question.answerer_name == "olga2"
    admin = django_user_model.objects.create_superuser("root", password="pw-root-12345")
    client.force_login(admin)
    assert client.get(f"/api/runs/{run.id}/").json()["created_by"] == "olga2"
    assert "olga2" in client.get(f"/runs/{run.id}/interrupts/").content.decode()


def test_planwatch_https_turns_on_every_tls_setting_and_check_deploy_is_clean():
    import secrets
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {**os.environ, "DEBUG": "false", "PLANWATCH_HTTPS": "true",
           "SECRET_KEY": secrets.token_urlsafe(60)}
    done = subprocess.run([sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout, done.stdout + done.stderr
    plain = subprocess.run([sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT,
                           env={**env, "PLANWATCH_HTTPS": "false"}, capture_output=True,
                           text=True, timeout=120)
    assert "security.W008" in plain.stdout + plain.stderr  # without it: no SSL redirect


@pytest.mark.django_db
def test_every_page_carries_the_content_security_policy(client, operator):
    client.force_login(operator)
    policy = client.get("/").headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]


@pytest.mark.django_db
def test_wrong_passwords_lock_the_account_out_for_a_while(client, django_user_model, settings):
    django_user_model.objects.create_user("admin2", password="pw-right-12345")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = client.post("/accounts/login/", {"username": "admin2", "password": "wrong"})
        assert response.status_code == 200  # the form again, with its error
    last = client.post("/accounts/login/", {"username": "admin2", "password": "wrong"})
    assert last.status_code == 429
    locked = client.post("/accounts/login/", {"username": "admin2", "password": "pw-right-12345"})
    assert locked.status_code == 429 and "Too many failed sign-ins" in locked.content.decode()
    assert "_auth_user_id" not in client.session
    other = client.post("/accounts/login/", {"username": "nobody", "password": "x"})
    assert other.status_code == 200  # another account is not locked by these attempts


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("host", "origin"), [
    ("evil.example", "http://evil.example"),  # a host not in ALLOWED_HOSTS (DNS rebinding)
    ("evil.example:8000", "http://evil.example:8000"),
    ("127.0.0.1:8000", "http://evil.example"),  # another site's page
])
async def test_a_socket_to_a_host_not_served_is_refused(host, origin):
    closed = await _connect("/ws/runs/", origin, host=host)
    assert closed.get("code") == 4403


@pytest.mark.django_db(transaction=True)
def test_a_token_in_the_query_string_never_reaches_the_access_log(live_server_url):
    import asyncio
    from urllib.parse import urlsplit

    import httpx
    import websockets

    from tests.conftest import ARTIFACTS

    secret = "tok" + __import__("uuid").uuid4().hex
    port = urlsplit(live_server_url).port
    for path in (f"/langgraph/threads/search?api_key={secret}",
                 f"/api/runs/?token={secret}&page_size=2", f"/ws/runs/?token={secret}"):
        assert httpx.post(live_server_url + path, json={}).status_code < 500

    async def socket() -> None:  # anonymous: refused, but the attempt is logged
        url = live_server_url.replace("http", "ws") + f"/ws/runs/?token={secret}&x=1"
        with pytest.raises((websockets.InvalidStatus, websockets.ConnectionClosed)):
            async with websockets.connect(url, origin=live_server_url) as ws:
                await asyncio.wait_for(ws.recv(), 5)

    asyncio.run(socket())
    log = (ARTIFACTS / f"daphne-{port}.log").read_text()
    assert "WSREJECT /ws/runs/" in log  # the socket's attempt (daphne logs no query)
    assert "/api/runs/?token=[redacted]&page_size=2" in log  # logged, redacted
    assert "/langgraph/threads/search?api_key=[redacted]" in log
    assert secret not in log
