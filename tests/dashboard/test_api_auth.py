"""API authentication and permissions: tokens, sessions, the pages' three permissions."""

from __future__ import annotations

import io
import uuid

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from dashboard.models import Interrupt, Run
from tests.conftest import api_token

pytestmark = pytest.mark.django_db


EVERY_ENDPOINT = [
    ("get", "/api/graphs/"),
    ("get", "/api/graphs/acquisition/"),
    ("get", "/api/runs/"),
    ("post", "/api/runs/"),
    ("get", "/api/runs/{run}/"),
    ("post", "/api/runs/{run}/cancel/"),
    ("get", "/api/runs/{run}/events/"),
    ("get", "/api/runs/{run}/checkpoints/"),
    ("get", "/api/runs/{run}/checkpoints/abc/"),
    ("get", "/api/interrupts/"),
    ("get", "/api/interrupts/{interrupt}/"),
    ("post", "/api/interrupts/{interrupt}/answer/"),
    ("get", "/api/schema/"),
    ("get", "/api/no-such-thing/"),
]


@pytest.fixture
def pending(operator) -> Interrupt:
    """A queued run with one pending interrupt (no executor involved)."""
    run = Run.objects.create(graph="acquisition", thread_id=f"{uuid.uuid4()}:planner",
                             state=Run.State.INTERRUPTED, created_by=operator)
    return Interrupt.objects.create(run=run, interrupt_id="i-1", node="ask_user",
                                    payload={"field": "core.region"})


def token_client(user) -> Client:
    """A client that authenticates with ``user``'s token and no session."""
    return Client(headers={"Authorization": f"Token {api_token(user)}"})


def test_anonymous_gets_401_json_on_every_endpoint(client, pending):
    for method, url in EVERY_ENDPOINT:
        path = url.format(run=pending.run_id, interrupt=pending.pk)
        response = getattr(client, method)(path, content_type="application/json",
                                           headers={"Accept": "application/json"})
        assert response.status_code == 401, (path, response.status_code)
        assert response["WWW-Authenticate"] == "Token", path
        assert response.json()["detail"] == "Authentication credentials were not provided."


def test_a_wrong_token_is_refused(client):
    response = client.get("/api/runs/", headers={"Authorization": "Token not-a-real-key"})
    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid token."


def test_a_token_made_by_the_management_command_authenticates(operator):
    from knox.models import AuthToken

    out = io.StringIO()
    call_command("create_token", "olga", stdout=out, stderr=io.StringIO())
    key = out.getvalue().strip()
    stored = AuthToken.objects.get(user=operator)
    assert key not in (stored.digest, stored.token_key)  # only a digest and a prefix are kept
    assert stored.expiry is not None  # tokens expire
    response = Client().get("/api/runs/", headers={"Authorization": f"Token {key}"})
    assert response.status_code == 200
    assert response.json()["results"] == []
    stored.delete()  # revoked
    assert Client().get("/api/runs/", headers={"Authorization": f"Token {key}"}
                        ).status_code == 401


def test_an_expired_token_is_refused(operator):
    from datetime import timedelta

    from knox.models import AuthToken

    _, key = AuthToken.objects.create(user=operator, expiry=timedelta(seconds=-1))
    assert Client().get("/api/runs/", headers={"Authorization": f"Token {key}"}
                        ).status_code == 401


def test_a_token_is_checked_with_one_query_and_expired_ones_go_with_the_next_token(
        operator, django_assert_num_queries):
    from datetime import timedelta

    from knox.models import AuthToken

    from dashboard.api.auth import TokenAuthentication, create_token

    AuthToken.objects.create(user=operator, expiry=timedelta(seconds=-1))  # left behind
    key = create_token(operator)
    assert AuthToken.objects.filter(user=operator).count() == 1  # the expired one went
    AuthToken.objects.create(user=operator, expiry=timedelta(seconds=-1))
    # the token with its user (knox also read every token of the user), then the user's
    # permissions and their groups' in one statement (ModelBackend: two, at the first
    # has_perm)
    with django_assert_num_queries(2):
        user, token = TokenAuthentication().authenticate_credentials(key.encode())
        assert user.has_perm("dashboard.start_run") and not user.has_perm("dashboard.fork_run")
    assert user == operator and token.user_id == operator.pk
    expired = AuthToken.objects.create(user=operator, expiry=timedelta(seconds=-1))[1]
    assert Client().get("/api/runs/", headers={"Authorization": f"Token {expired}"}
                        ).status_code == 401
    assert AuthToken.objects.filter(user=operator).count() == 2  # the one presented went
    create_token(operator, hours=1)
    assert AuthToken.objects.filter(user=operator, expiry__lt=timezone.now()).count() == 0


def test_a_session_authenticates_and_writes_need_its_csrf_token(operator):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(operator)
    assert browser.get("/api/runs/").status_code == 200
    refused = browser.post("/api/runs/", {"graph": "acquisition"},
                           content_type="application/json")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]


def _check(key: str):
    from dashboard.api.auth import TokenAuthentication

    return TokenAuthentication().authenticate_credentials(key.encode())


def test_a_check_that_passed_is_kept_and_asks_nothing_while_it_is(
        operator, django_assert_num_queries):
    key = api_token(operator)
    first, _ = _check(key)
    with django_assert_num_queries(0):
        user, token = _check(key)
        assert user.has_perm("dashboard.start_run") and policy_is_team(user)
        assert not user.has_perm("dashboard.fork_run")
    assert user == operator and token.user_id == operator.pk
    user.first_name = "changed by one request"  # a request's own copy
    assert _check(key)[0].first_name == "" and first is not user


def policy_is_team(user) -> bool:
    from dashboard import policy

    return policy.is_team(user)


def test_a_change_seen_by_the_process_takes_effect_at_once(operator, django_assert_num_queries):
    from django.contrib.auth.models import Group, Permission
    from knox.models import AuthToken
    from rest_framework.exceptions import AuthenticationFailed

    key = api_token(operator)
    _check(key)
    operator.user_permissions.remove(Permission.objects.get(codename="start_run"))
    with django_assert_num_queries(2):  # read again
        assert not _check(key)[0].has_perm("dashboard.start_run")
    group = Group.objects.create(name="forkers")
    operator.groups.add(group)
    _check(key)
    group.permissions.add(Permission.objects.get(codename="fork_run"))
    assert _check(key)[0].has_perm("dashboard.fork_run")  # a group's permission
    operator.is_active = False
    operator.save()
    with pytest.raises(AuthenticationFailed, match="inactive"):
        _check(key)
    operator.is_active = True
    operator.save()
    _check(key)
    AuthToken.objects.filter(user=operator).delete()  # revoked (the admin, knox's logout)
    with pytest.raises(AuthenticationFailed, match="Invalid token"):
        _check(key)


def test_a_change_made_elsewhere_takes_effect_within_auth_cache_seconds(
        operator, settings, monkeypatch):
    from django.contrib.auth.models import Permission

    from dashboard.api import auth

    settings.PLANWATCH = {**settings.PLANWATCH, "AUTH_CACHE_SECONDS": 5.0}
    key = api_token(operator)
    _check(key)
    # a bulk UPDATE, or another process's change: this process sees no signal
    operator.user_permissions.through.objects.filter(
        user=operator, permission__codename="start_run").delete()
    assert _check(key)[0].has_perm("dashboard.start_run")  # kept: as checked 0 s ago
    now = auth.time.monotonic()
    monkeypatch.setattr(auth.time, "monotonic", lambda: now + 5.0)
    assert not _check(key)[0].has_perm("dashboard.start_run")
    assert Permission.objects.filter(codename="start_run").exists()


def test_no_check_is_kept_with_auth_cache_seconds_0(operator, settings,
                                                    django_assert_num_queries):
    settings.PLANWATCH = {**settings.PLANWATCH, "AUTH_CACHE_SECONDS": 0}
    key = api_token(operator)
    _check(key)
    with django_assert_num_queries(2):
        assert _check(key)[0].has_perm("dashboard.start_run")


def test_a_kept_token_that_expired_is_refused_and_deleted(operator, monkeypatch):
    from datetime import timedelta

    from knox.models import AuthToken
    from rest_framework.exceptions import AuthenticationFailed

    key = AuthToken.objects.create(user=operator, expiry=timedelta(hours=1))[1]
    _check(key)
    later = timezone.now() + timedelta(hours=2)
    monkeypatch.setattr(timezone, "now", lambda: later)
    with pytest.raises(AuthenticationFailed):
        _check(key)
    assert not AuthToken.objects.filter(user=operator).exists()


def test_a_superusers_check_holds_every_permission(admin_user, django_assert_num_queries):
    key = api_token(admin_user)
    _check(key)
    with django_assert_num_queries(0):
        user, _ = _check(key)
        assert user.has_perm("dashboard.fork_run")
        assert "dashboard.fork_run" in user.get_all_permissions()


def test_an_inactive_users_token_is_refused(operator):
    client = token_client(operator)
    operator.is_active = False
    operator.save()
    response = client.get("/api/runs/")
    assert response.status_code == 401
    assert response.json()["detail"] == "User inactive or deleted."


def test_a_viewer_may_read_but_not_start_cancel_or_answer(viewer, pending):
    client = token_client(viewer)
    assert client.get(f"/api/runs/{pending.run_id}/").status_code == 200
    assert client.get(f"/api/interrupts/{pending.pk}/").status_code == 200
    for path, permission in [
        ("/api/runs/", "dashboard.start_run"),
        (f"/api/runs/{pending.run_id}/cancel/", "dashboard.cancel_run"),
        (f"/api/interrupts/{pending.pk}/answer/", "dashboard.answer_interrupt"),
    ]:
        response = client.post(path, {"graph": "acquisition", "answer": "Germany"},
                               content_type="application/json")
        assert response.status_code == 403, path
        assert permission in response.json()["detail"]
        assert response.json()["code"] == "permission_denied"
    # nothing happened
    assert Run.objects.count() == 1
    pending.refresh_from_db()
    assert pending.status == Interrupt.Status.PENDING
    assert pending.run.status == Run.Status.INTERRUPTED


def test_each_permission_alone_allows_only_its_action(django_user_model, pending):
    from django.contrib.auth.models import Permission

    canceller = django_user_model.objects.create_user(username="carl", password="pw-carl-1234")
    # of the team (dashboard.policy), so another operator's run is theirs to cancel
    canceller.user_permissions.set(Permission.objects.filter(
        codename__in=["cancel_run", "view_all_threads"]))
    client = token_client(canceller)
    assert client.post("/api/runs/", {"graph": "acquisition"},
                       content_type="application/json").status_code == 403
    assert client.post(f"/api/interrupts/{pending.pk}/answer/", {"answer": "France"},
                       content_type="application/json").status_code == 403
    response = client.post(f"/api/runs/{pending.run_id}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"


def test_the_schema_is_openapi_3_and_lists_every_resource(operator):
    response = token_client(operator).get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert set(schema["paths"]) == {
        "/api/graphs/", "/api/graphs/{id}/", "/api/runs/", "/api/runs/{id}/",
        "/api/runs/{id}/cancel/", "/api/runs/{id}/events/", "/api/runs/{id}/checkpoints/",
        "/api/runs/{id}/breakpoints/", "/api/runs/{id}/continue/", "/api/runs/{id}/fork/",
        "/api/runs/{id}/budget/", "/api/runs/{id}/fork-ways/", "/api/runs/compare/",
        "/api/runs/{id}/export/",
        "/api/runs/{id}/checkpoints/{checkpoint_id}/", "/api/interrupts/",
        "/api/interrupts/{id}/", "/api/interrupts/{id}/answer/", "/api/interrupts/history/",
    }
    assert set(schema["components"]["securitySchemes"]) == {"knoxApiToken", "cookieAuth"}
    create = schema["paths"]["/api/runs/"]["post"]["responses"]
    assert {"201", "400", "401", "403", "413"} <= set(create)


def test_the_docs_pages_need_a_login_and_load_their_assets_locally(client, operator):
    anonymous = client.get("/api/docs/")
    assert anonymous.status_code == 302
    assert anonymous["Location"] == "/accounts/login/?next=/api/docs/"
    client.force_login(operator)
    for page in ("/api/docs/", "/api/redoc/"):
        html = client.get(page).content.decode()
        assert "/static/drf_spectacular_sidecar/" in html, page
        assert "cdn." not in html and "unpkg" not in html, page
    bundle = client.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert bundle.status_code == 200
    assert b"SwaggerUIBundle" in b"".join(bundle.streaming_content)


def test_the_browsable_api_renders_pages_and_errors_for_a_signed_in_browser(client, operator):
    client.force_login(operator)
    html = {"Accept": "text/html"}
    listing = client.get("/api/runs/", headers=html)
    assert listing.status_code == 200
    assert "Run List" in listing.content.decode() and "olga" in listing.content.decode()
    big = client.post("/api/runs/", '{"graph": "' + "x" * 300_000 + '"}',
                      content_type="application/json", headers=html)
    assert big.status_code == 413
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in big.content.decode()
    missing = client.get(f"/api/runs/{uuid.uuid4()}/", headers=html)
    assert missing.status_code == 404
    for page, code in [("/api/graphs/", 200), ("/api/graphs/acquisition/", 200),
                       ("/api/interrupts/", 200), ("/api/interrupts/1/answer/", 405)]:
        response = client.get(page, headers=html)
        assert response.status_code == code, page
        assert response["Content-Type"].startswith("text/html"), page
