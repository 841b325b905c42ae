"""Shared fixtures: real services (PostgreSQL, Redis, Chromium), users, a live daphne server.

Where ``CI`` is set a missing service fails the test; elsewhere the test is skipped with
a reason that says what to install or start.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from django.contrib.auth.models import Permission

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = os.environ.get("PLANWATCH_CHROMIUM", "/usr/bin/chromium")
REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
IN_CI = bool(os.environ.get("CI"))

# fixtures that tests of several folders share (their helpers: import tests.support.*)
pytest_plugins = ["tests.support.models", "tests.support.notices"]


def need(what: str, available: bool, how: str) -> None:
    """Fail under CI, skip elsewhere, when a real component is missing."""
    if available:
        return
    message = f"{what} is not available: {how}"
    if IN_CI:
        pytest.fail(f"CI is set, so this is a failure, not a skip. {message}")
    pytest.skip(message)


def port_open(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def free_port() -> int:
    """An unused loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A real Redis server's URL (``REDIS_URL`` or the local default)."""
    from urllib.parse import urlparse

    parsed = urlparse(REDIS_URL)
    need(
        "Redis", port_open(parsed.hostname or "127.0.0.1", parsed.port or 6379),
        f"start redis-server on {parsed.hostname}:{parsed.port} or set REDIS_URL",
    )
    return REDIS_URL


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium binary (never a browser downloaded by Playwright)."""
    need("Chromium", Path(CHROMIUM).exists() or bool(shutil.which(CHROMIUM)),
         "apt-get install -y chromium (or set PLANWATCH_CHROMIUM)")
    return CHROMIUM


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """The tests' users hash their passwords with PBKDF2 at 1,000 iterations (see
    :mod:`tests.hashers`): at Django's 1.5 million, each user a test makes cost ~1 s."""
    settings.PASSWORD_HASHERS = ["tests.hashers.FastPBKDF2PasswordHasher",
                                 *settings.PASSWORD_HASHERS]


@pytest.fixture
def operator(django_user_model):
    """A signed-in-able operator of the team (sees everyone's runs: dashboard.policy) who
    may start runs, answer interrupts and cancel."""
    user = django_user_model.objects.create_user(username="olga", password="pw-olga-1234")
    user.user_permissions.set(
        Permission.objects.filter(
            codename__in=["start_run", "cancel_run", "answer_interrupt", "view_all_threads"]
        )
    )
    return user


@pytest.fixture
def viewer(django_user_model):
    """A user of the team who may look at everyone's runs but not start, answer or cancel."""
    user = django_user_model.objects.create_user(username="vic", password="pw-vic-1234")
    user.user_permissions.set(Permission.objects.filter(codename="view_all_threads"))
    return user


def database_url(settings_dict: dict) -> str:
    """A ``DATABASE_URL`` for the database Django uses now (the test database in tests)."""
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{Path(settings_dict['NAME']).resolve()}"
    user = quote(settings_dict.get("USER") or "")
    password = quote(settings_dict.get("PASSWORD") or "")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{auth}{host}:{port}/{settings_dict['NAME']}"


def serving(port: int) -> bool:
    """Whether ``manage.py serve`` on ``port`` answers: its ``/healthz`` says 200 (the
    socket is open before a web process answers on it)."""
    from urllib.error import URLError
    from urllib.request import urlopen

    if not port_open("127.0.0.1", port):
        return False
    try:
        with urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return response.status == 200
    except (URLError, OSError):
        return False


def wait_serving(proc: subprocess.Popen, port: int) -> bool:
    """Wait until ``proc`` (``manage.py serve``) answers on ``port``: True, or False when
    it exited or did not answer within ``PLANWATCH_TEST_SERVE_WAIT`` seconds (default 90:
    a loaded machine, both cores busy, took over 30 s to start one)."""
    deadline = time.monotonic() + float(os.environ.get("PLANWATCH_TEST_SERVE_WAIT", "90"))
    while not serving(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


SERVED: dict[str, subprocess.Popen] = {}
"""The daphne processes :func:`served` runs, by base URL (their memory is measured)."""


# The daphnes a whole session keeps open draw on PostgreSQL's max_connections (100) beside
# a stress test's daphne with the default pools (web 20 + runs 20 + event log 10): these
# hold at most 6 + 6 + 3 each.
SMALL_POOLS = {"DB_POOL_MAX_SIZE": "6", "PLANWATCH_RUN_DB_POOL_SIZE": "6"}


@contextlib.contextmanager
def served(django_db_blocker, *, port: int | None = None,
           **extra_env: str) -> Iterator[str]:
    """Planwatch served by a real daphne subprocess (``manage.py serve``) on the test DB,
    with ``extra_env`` added to its environment (on ``port``, to restart one where it
    was; by default a free one); yields its base URL."""
    from django.db import connection

    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    port = port or free_port()
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "PLANWATCH_THINK_TIME": os.environ.get("PLANWATCH_TEST_THINK_TIME", "0.05"),
        # its notice and deadline loop looks once, at start: the deadline tests sweep at
        # moments they choose, which a session daphne's sweep in real time would race
        "PLANWATCH_NOTICE_POLL_SECONDS": "3600",
        "PYTHONUNBUFFERED": "1",
        **extra_env,
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = (ARTIFACTS / f"daphne-{port}.log").open("w")
    proc = subprocess.Popen(
        # one process whatever the database (PostgreSQL's default is the cores): the tests
        # watch this process, its memory and its executor
        [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--processes", "1"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    if not wait_serving(proc, port):
        proc.kill()
        log.close()
        pytest.fail(f"daphne did not start; see {log.name}")
    SERVED[f"http://127.0.0.1:{port}"] = proc
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        SERVED.pop(f"http://127.0.0.1:{port}", None)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _flush_by_delete() -> None:
    """A transactional test's flush on PostgreSQL by ``DELETE`` rather than Django's
    ``TRUNCATE``: a few rows in each of ~50 tables, where TRUNCATE's fixed cost per table
    (new files for each) made every flush 0.45 s, a third of the PostgreSQL pass. Django's
    foreign keys there are deferred, so the order does not matter within the flush's
    transaction; a flush that resets sequences keeps Django's statement."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade:
            return truncate(self, style, tables, reset_sequences=reset_sequences,
                            allow_cascade=allow_cascade)
        return [f"DELETE FROM {self.quote_name(table)};" for table in tables]

    DatabaseOperations.sql_flush = sql_flush


_flush_by_delete()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup):
    """pytest-django's, closing the checkpoint read pools before the test database is
    dropped (an open connection would keep it)."""
    yield
    from dashboard.checkpoints import close_read_pools

    close_read_pools()


@pytest.fixture(scope="session")
def live_server_url(django_db_setup, django_db_blocker) -> Iterator[str]:
    """Planwatch served by a real daphne subprocess (``manage.py serve``) on the test DB."""
    with served(django_db_blocker, **SMALL_POOLS) as url:
        yield url


@pytest.fixture(scope="session")
def browser(chromium):
    """One headless Debian Chromium for the session, driven by Playwright."""
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls
    # are still plain synchronous code, so Django's async-safety guard must stand aside.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    """A fresh browser context and page (no shared cookies between tests)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    yield page
    context.close()


def screenshot(page, name: str) -> Path:
    """Write a full-page screenshot under tests/artifacts/ (look at them)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    db = "pg" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "sqlite"
    path = ARTIFACTS / f"{name}-{db}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def login(page, base_url: str, username: str, password: str) -> None:
    """Sign in through the real login form."""
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")


@pytest.fixture(autouse=True)
def no_writer_left(request):
    """A transactional test's runs and crons are stopped (or ended and fenced off) before
    its database is flushed (:mod:`tests.support.writers`)."""
    marker = request.node.get_closest_marker("django_db")
    transactional = "transactional_db" in request.fixturenames or "live_server" in \
        request.fixturenames or bool(marker and marker.kwargs.get("transaction"))
    if not transactional:
        yield
        return
    # set up before this fixture, so torn down (flushed) after it
    request.getfixturevalue("transactional_db")
    yield
    from tests.support.writers import writers_stop

    _left, stuck = writers_stop()
    if stuck:
        pytest.fail(f"runs {', '.join(stuck)} still write after being cancelled: "
                    "stop them before the test ends", pytrace=False)


@pytest.fixture
def executor(transactional_db, settings):
    """This process's run executor on the test database, stopped before the DB is flushed."""
    import tests.graphs  # noqa: F401  (registers the test graphs)
    from dashboard.runs.dispatch import get_executor, reset_executor

    settings.PLANWATCH = {**settings.PLANWATCH, "THINK_TIME": 0.0}
    reset_executor()
    yield get_executor()
    reset_executor()


def wait_run(run_id, statuses=("succeeded", "failed", "cancelled", "interrupted"),
             timeout: float = 60):
    """Poll until the run reaches one of ``statuses`` (a deadlock guard, not a speed test)."""
    from dashboard.models import Run

    deadline = time.monotonic() + timeout
    while True:
        run = Run.objects.get(id=run_id)
        if run.status in statuses:
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} still {run.status} after {timeout} s")
        time.sleep(0.05)


def wait_started(run, timeout: float = 30) -> None:
    """Poll until the run has started a node (a deadlock guard, not a speed test)."""
    from dashboard.models import RunEvent

    deadline = time.monotonic() + timeout
    while not run.events.filter(kind=RunEvent.Kind.NODE_STARTED).exists():
        assert time.monotonic() < deadline, f"run {run.id} started no node in {timeout} s"
        time.sleep(0.02)


def assert_gapless(run) -> list:
    """The run's events are numbered 1..n without gap or duplicate, n = run.last_seq."""
    seqs = list(run.events.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)), f"gaps or duplicates in {seqs}"
    assert seqs[-1] == run.last_seq
    return list(run.events.order_by("seq"))


BROWSER_GATE = (
    "tests/browser/test_login.py::",
    "tests/browser/test_operator.py::test_an_acquisition_run_from_form_to_result_and_replay[desktop]",
    "tests/browser/test_connection.py::",
    "tests/browser/test_trace.py::test_an_acquisition_trace_marks_visits_decisions_and_inspects_state",
    "tests/browser/test_waterfall.py::test_a_failed_plan_is_shown_failed_with_its_red_bars",
    "tests/browser/test_waterfall_times.py::",
    "tests/browser/test_inbox_many.py::",
    "tests/browser/test_notifications.py::",
    "tests/lgserver/test_chat_ui_client.py::",
    "tests/lgserver/test_js_client.py::",
    "tests/lgserver/test_budget_inbox.py::",  # Agent Inbox's reading of a budget pause
    "tests/dashboard/test_api_docs.py::",
)
"""The browser tests CI's ``make test`` runs (2 min 32 s in CI on this machine): an operator's
journey from form to answer to result, a lost connection that keeps the answer, a trace, a
failed plan shown failed, the inbox of many, a notification, LangGraph's JS clients and the
API reference. The rest (accessibility at both widths, the 215-task plan, live
decompositions, timelines, debugging, drafts, lists) are ``long``: ``make test-all``
(another eight minutes; all of them at once did not fit CI's fifteen)."""

SERVER_FIXTURES = frozenset({"live_server_url", "lg_url", "browser", "page", "chromium",
                             "phoenix"})
"""Fixtures that start a process (daphne, Chromium): a test using one is not in the fast
layer (``make test-fast``) without saying so; a module that starts one itself is marked
``server``."""


def pytest_collection_modifyitems(config, items):
    """Run browser tests last: Playwright's sync API leaves an event loop in the main thread,
    which the asyncio tests after it would trip over. A test that needs a real PostgreSQL
    or Redis belongs to the second pass (``pg``) without saying so twice, a ``pg`` test of
    the run engine runs in both passes (``both``), and one that starts a server is not in
    the fast layer (``server``)."""
    for item in items:
        if item.get_closest_marker("postgres") or item.get_closest_marker("redis"):
            item.add_marker(pytest.mark.pg)
        if "tests/dashboard/runs/" in str(item.path) and item.get_closest_marker("pg") \
                and not item.get_closest_marker("postgres"):
            item.add_marker(pytest.mark.both)  # the engine: SQLite's SQL and saver too
        if item.get_closest_marker("browser") and not item.nodeid.startswith(BROWSER_GATE):
            item.add_marker(pytest.mark.long)
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)
        if item.get_closest_marker("long") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(1200))  # hundreds of streams, storms
    # the slow modules first: pytest-xdist hands modules out in this order, and a slow one
    # handed out last is the tail of its pass, one core idle
    items.sort(key=lambda item: (item.get_closest_marker("browser") is not None,
                                 item.get_closest_marker("slow") is None))


def api_token(user) -> str:
    """A fresh API token key for ``user`` (stored hashed; the key exists only here)."""
    from knox.models import AuthToken

    return AuthToken.objects.create(user=user)[1]


class Migrated:
    """The test database's schema moved to a migration, for rows made as older code made
    them (``at``: the models there), then on; back to the newest schema when the block
    ends, whatever happened, as the other tests expect it."""

    def __init__(self) -> None:
        from django.db import connection
        from django.db.migrations.executor import MigrationExecutor

        self.executor = MigrationExecutor(connection)

    def at(self, targets: list[tuple[str, str]]):
        """Migrate to ``targets``; the models (``apps``) as they stand there."""
        self.executor.loader.build_graph()  # what is applied now
        return self.executor.migrate(targets).apps

    def __enter__(self) -> Migrated:
        return self

    def __exit__(self, *exc: object) -> None:
        self.at(self.executor.loader.graph.leaf_nodes())
