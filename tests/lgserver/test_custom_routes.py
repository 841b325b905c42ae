"""A langgraph.json's custom routes (``http.app``) under /langgraph/, as LangGraph's server
mounts them: the app's routes answer beside the API, public unless
``enable_custom_route_auth`` asks for a token, never in place of a path Planwatch serves,
and its paths join /langgraph/openapi.json."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Request
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from dashboard import checks, http_app
from dashboard.http_app import CustomApp, read_custom_app
from dashboard.lgserver import custom_routes
from dashboard.lgserver.custom_routes import CustomRoutes
from planner.langgraph_config import ConfigError
from tests.conftest import api_token


def shop() -> FastAPI:
    """A user's app: a public route, one reading its caller, and two on Planwatch's paths."""
    app = FastAPI()

    @app.get("/shop/hours")
    async def hours() -> dict:
        """When the shop is open."""
        return {"open": "9-17"}

    @app.get("/shop/whoami")
    async def whoami(request: Request) -> dict:
        user = request.user
        return {"identity": user.identity, "display_name": user.display_name,
                "is_authenticated": user.is_authenticated,
                "can_start": "dashboard.start_run" in request.auth.scopes}

    @app.get("/info")
    async def info() -> dict:
        return {"shadowed": True}

    @app.get("/ok")
    async def ok() -> dict:
        return {"shadowed": True}

    return app


async def django(scope, receive, send) -> None:
    """Stands in for Planwatch's Django app: says it answered."""
    await JSONResponse({"django": scope["path"]})(scope, receive, send)


def client(app: FastAPI | Starlette, *, authenticated: bool = False) -> httpx.AsyncClient:
    routes = CustomRoutes(django, CustomApp(app=app, where="./routes.py:app",
                                            authenticated=authenticated))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=routes),
                             base_url="http://testserver")


async def test_the_apps_routes_answer_under_langgraph_and_planwatchs_paths_stay_planwatchs():
    async with client(shop()) as http:
        hours = await http.get("/langgraph/shop/hours")
        assert hours.status_code == 200 and hours.json() == {"open": "9-17"}
        # a route of the app on a path Planwatch serves never answers
        for path in ("/langgraph/info", "/langgraph/ok", "/langgraph/threads/search"):
            assert (await http.get(path)).json() == {"django": path}
        # a path no route of the app matches is Planwatch's too (its 404 says what is served)
        assert (await http.get("/langgraph/shop/nothing")).json() == {
            "django": "/langgraph/shop/nothing"}
        # the app is mounted under /langgraph only
        assert (await http.get("/shop/hours")).json() == {"django": "/shop/hours"}


async def test_a_method_the_route_lacks_is_the_apps_405():
    async with client(shop()) as http:
        response = await http.post("/langgraph/shop/hours")
    assert response.status_code == 405


@pytest.mark.django_db(transaction=True)
async def test_with_enable_custom_route_auth_a_token_is_needed_and_the_app_sees_its_user(
        django_user_model):
    alice = await django_user_model.objects.acreate(username="alice", first_name="Alice")
    bob = await django_user_model.objects.acreate(username="bob")
    keys = {user.username: await _token(user) for user in (alice, bob)}
    async with client(shop(), authenticated=True) as http:
        for headers in ({}, {"x-api-key": "not-a-token"}):
            refused = await http.get("/langgraph/shop/hours", headers=headers)
            assert refused.status_code == 401
            assert "enable_custom_route_auth" in refused.json()["detail"]
            assert refused.headers["www-authenticate"] == "x-api-key"
        # either user (the app's routes are the app's: which of them it serves is its rule)
        alice_sees = await http.get("/langgraph/shop/whoami", headers={"x-api-key": keys["alice"]})
        assert alice_sees.json() == {"identity": "alice", "display_name": "Alice",
                                     "is_authenticated": True, "can_start": False}
        bob_sees = await http.get("/langgraph/shop/whoami",
                                  headers={"Authorization": f"Token {keys['bob']}"})
        assert bob_sees.json()["identity"] == "bob"
        # Planwatch's own paths are answered by Planwatch, whatever the key
        assert (await http.get("/langgraph/info")).json() == {"django": "/langgraph/info"}
        bob.is_active = False
        await bob.asave()
        gone = await http.get("/langgraph/shop/whoami", headers={"x-api-key": keys["bob"]})
        assert gone.status_code == 401


async def _token(user) -> str:
    from asgiref.sync import sync_to_async

    return await sync_to_async(api_token)(user)


async def test_the_apps_lifespan_runs_before_its_first_request_and_its_state_is_seen():
    started: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict]:
        started.append("up")
        yield {"greeting": "hello"}

    async def greet(request) -> JSONResponse:
        return JSONResponse({"greeting": request.state.greeting})

    app = Starlette(routes=[Route("/greet", greet)], lifespan=lifespan)
    async with client(app) as http:
        assert started == []
        for _ in range(2):
            assert (await http.get("/langgraph/greet")).json() == {"greeting": "hello"}
    assert started == ["up"]  # once


async def test_an_app_whose_lifespan_fails_answers_503_saying_so():
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        raise RuntimeError("no database")
        yield

    app = Starlette(routes=[Route("/greet", lambda r: JSONResponse({}))], lifespan=lifespan)
    async with client(app) as http:
        response = await http.get("/langgraph/greet")
    assert response.status_code == 503
    assert "./routes.py:app" in response.json()["detail"]


def write_config(tmp_path: Path, http: object, routes: str = "") -> str:
    (tmp_path / "routes.py").write_text(routes or "from fastapi import FastAPI\napp = FastAPI()\n")
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {}, "http": http}))
    return str(config)


def test_the_config_names_its_app_and_whether_it_needs_a_token(tmp_path):
    loaded = read_custom_app(write_config(tmp_path, {"app": "./routes.py:app",
                                                     "enable_custom_route_auth": True}))
    assert isinstance(loaded.app, FastAPI) and loaded.authenticated
    assert read_custom_app(write_config(tmp_path, {"disable_mcp": True})) is None


@pytest.mark.parametrize(("http", "routes", "error"), [
    ("./routes.py:app", "", r'"http" .* not an object'),
    ({"app": "routes"}, "", r"http.app 'routes' is not 'path/to/file.py:app'"),
    ({"app": "./routes.py:app", "enable_custom_route_auth": "yes"}, "",
     r"enable_custom_route_auth 'yes' is not true or false"),
    ({"app": "./routes.py:app"}, "app = object()\n",
     r"http.app './routes.py:app' is a object, not a Starlette or FastAPI application"),
    ({"app": "./routes.py:missing"}, "", r"http.app: .* has no attribute 'missing'"),
    ({"app": "./nowhere.py:app"}, "", r"http.app: no file .*nowhere.py"),
])
def test_a_bad_http_app_is_refused_saying_what_is_wrong(tmp_path, http, routes, error):
    with pytest.raises(ConfigError, match=error):
        read_custom_app(write_config(tmp_path, http, routes))


@pytest.fixture
def configured(settings):
    """Sets ``PLANWATCH_LANGGRAPH_CONFIG`` for this process's loader, then forgets it."""
    def configure(path: str) -> None:
        settings.PLANWATCH = {**settings.PLANWATCH, "LANGGRAPH_CONFIG": path}
        http_app._loaded.cache_clear()

    yield configure
    http_app._loaded.cache_clear()


def test_an_app_that_fails_to_load_is_named_by_manage_py_check(tmp_path, configured):
    configured(write_config(tmp_path, {"app": "./routes.py:app"},
                           "raise RuntimeError('no shop today')\n"))
    assert http_app.custom_app() is None
    [warning] = checks.langgraph_http_app()
    assert warning.id == "planwatch.W002"
    assert "RuntimeError: no shop today" in warning.msg
    configured(write_config(tmp_path, {"app": "./routes.py:app"}))
    assert checks.langgraph_http_app() == [] and isinstance(http_app.custom_app().app, FastAPI)


def test_a_fastapi_apps_paths_join_the_document_but_not_on_planwatchs_paths(monkeypatch):
    monkeypatch.setattr(custom_routes, "custom_app",
                        lambda: CustomApp(app=shop(), where="./routes.py:app"))
    ours = {"post": {"operationId": "post_threads_search"}}
    document = custom_routes.with_app_paths({"paths": {"/threads/search": ours}})
    assert document["paths"]["/threads/search"] == ours
    assert document["paths"]["/shop/hours"]["get"]["summary"] == "Hours"
    assert "/shop/whoami" in document["paths"]
    assert "/info" not in document["paths"] and "/ok" not in document["paths"]


def test_a_starlette_apps_routes_are_described_by_their_docstrings(monkeypatch):
    async def hours(request) -> JSONResponse:
        """When the shop is open.

        More words."""
        return JSONResponse({})

    app = Starlette(routes=[Route("/shop/hours", hours, methods=["GET"])])
    monkeypatch.setattr(custom_routes, "custom_app",
                        lambda: CustomApp(app=app, where="./routes.py:app"))
    document = custom_routes.with_app_paths({"paths": {}})
    assert document["paths"]["/shop/hours"]["get"]["summary"] == "When the shop is open."


# -- served, as a client sees them (the session's langgraph.json names routes.py) ---------


@pytest.mark.django_db(transaction=True)
def test_served_custom_routes_are_public_beside_the_api_which_they_never_replace(
        lg_url, sdk_user):
    assert httpx.get(f"{lg_url}/shop/hours").json() == {"open": "9-17"}  # no token needed
    # no route of the app answers a path Planwatch serves: its sign-in stays
    assert httpx.get(f"{lg_url}/info").status_code == 401
    assert httpx.post(f"{lg_url}/threads/search", json={}).status_code == 401
    key = {"x-api-key": api_token(sdk_user)}
    assert "shadowed" not in httpx.get(f"{lg_url}/info", headers=key).json()
    threads = httpx.post(f"{lg_url}/threads/search", json={}, headers=key).json()
    assert all("thread_id" in thread for thread in threads)  # Planwatch's answer, however many
    # without enable_custom_route_auth the app gets no user, as on LangGraph's server
    assert httpx.get(f"{lg_url}/shop/whoami", headers=key).json() == {"identity": None}
    document = httpx.get(f"{lg_url}/openapi.json", headers=key).json()
    assert document["servers"] == [{"url": "/langgraph"}]
    assert document["paths"]["/shop/hours"]["get"]["summary"] == "Hours"
    assert "requestBody" in document["paths"]["/threads/search"]["post"]  # Planwatch's
    assert httpx.get(f"{lg_url}/ok").json() == {"ok": True}
    assert httpx.get(f"{lg_url}/health").json()["status"] == "ready"


def headers_echo() -> FastAPI:
    """A user's app that answers the headers it was given, and its caller."""
    app = FastAPI()

    @app.get("/echo")
    async def echo(request: Request) -> dict:
        user = request.scope.get("user")
        return {"headers": {k.lower(): v for k, v in request.headers.items()},
                "identity": getattr(user, "identity", None)}

    return app


CREDENTIAL_HEADERS = ("authorization", "x-api-key", "cookie", "x-csrftoken")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("authenticated", [True, False])
async def test_the_app_never_receives_the_callers_credentials_but_its_identity(
        django_user_model, authenticated):
    """The caller's token (``x-api-key``, ``Authorization``), session cookie and CSRF token
    are taken off before the app sees the request; with ``enable_custom_route_auth`` it
    gets who calls (``request.user``, ``x-planwatch-user``), and a caller cannot forge it."""
    alice = await django_user_model.objects.acreate(username="alice")
    key = await _token(alice)
    sent = {"x-api-key": key, "authorization": f"Token {key}",
            "cookie": "sessionid=s3ss10n; csrftoken=abc", "x-csrftoken": "abc",
            "x-planwatch-user": "root", "x-shop": "kept"}
    async with client(headers_echo(), authenticated=authenticated) as http:
        answer = (await http.get("/langgraph/echo", headers=sent)).json()
    seen = answer["headers"]
    assert [h for h in CREDENTIAL_HEADERS if h in seen] == []
    assert key not in json.dumps(answer)
    assert seen["x-shop"] == "kept"
    if authenticated:
        assert answer["identity"] == "alice" and seen["x-planwatch-user"] == "alice"
    else:
        assert "x-planwatch-user" not in seen
