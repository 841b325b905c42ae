"""Settings, read from the environment; nothing else differs between deployment modes.

Embedded default (no variables set): SQLite under ``var/``, the in-memory channel layer,
runs executed inside the ASGI server. Scale-out: ``DATABASE_URL=postgres://…``,
``REDIS_URL=redis://…`` and ``PLANWATCH_EXECUTOR=procrastinate``.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from corsheaders.defaults import default_headers as default_cors_headers
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from config.connections import DEFAULT_RUN_DB_POOL_SIZE, DJANGO_POOL_SIZES

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("PLANWATCH_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    """Read a boolean variable; anything but 1/true/yes/on (any case) is false."""
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    """Read a comma-separated list variable."""
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def model_prices(raw: str) -> dict[str, dict[str, float]]:
    """Parse ``PLANWATCH_MODEL_PRICES``: JSON, model -> {"input": $/Mtok, "output": $/Mtok}."""
    if not raw.strip():
        return {}
    example = '{"gpt-4o-mini": {"input": 0.15, "output": 0.6}}'
    try:
        table = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"PLANWATCH_MODEL_PRICES is not JSON ({exc}); write it as {example}") from None
    if not isinstance(table, dict):
        raise ImproperlyConfigured(
            f"PLANWATCH_MODEL_PRICES must be a JSON object, not {raw!r}; e.g. {example}")
    prices: dict[str, dict[str, float]] = {}
    for model, price in table.items():
        if not (isinstance(price, dict) and set(price) == {"input", "output"}
                and all(isinstance(v, int | float) and v >= 0 for v in price.values())):
            raise ImproperlyConfigured(
                f"PLANWATCH_MODEL_PRICES[{model!r}] is {price!r}; give "
                '{"input": <USD per million tokens>, "output": <USD per million tokens>}')
        prices[str(model)] = {k: float(v) for k, v in price.items()}
    return prices


def json_object(name: str) -> dict[str, Any]:
    """Parse a JSON-object variable (empty: ``{}``)."""
    raw = os.environ.get(name, "")
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not JSON ({exc}); write an object such as "
                                   '{"max_cost_usd": 1.0, "on_limit": "pause"}') from None
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object, not {raw!r}")
    return value


def _secret_key() -> str:
    """``SECRET_KEY`` from the environment, else one generated once into ``var/``."""
    if key := os.environ.get("SECRET_KEY"):
        return key
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "daphne",  # first, so `runserver` serves ASGI (websockets included)
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "rest_framework",
    "knox",  # API tokens stored hashed, expiring, revocable
    "axes",  # login throttling and lockout
    "corsheaders",  # LangGraph clients served from other origins
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and Redoc served offline
    "dashboard",
]

MIDDLEWARE = [
    # /healthz, /readyz, /metrics: answered before host checks, TLS redirect and sign-in
    "dashboard.web.probes.probe_middleware",
    "corsheaders.middleware.CorsMiddleware",  # before anything that may answer
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "dashboard.web.middleware.CraftedInputMiddleware",  # NUL, lone surrogates, deep JSON: a 400
    "dashboard.web.middleware.LostConnectionMiddleware",  # a dropped connection: again, or a 503
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # refuses a locked-out user before the password
    "django.contrib.auth.backends.ModelBackend",
]
# Sign-in throttling: after PLANWATCH_LOGIN_FAILURES wrong passwords for one user from
# one address, that pair is locked out for PLANWATCH_LOCKOUT_MINUTES.
AXES_FAILURE_LIMIT = int(os.environ.get("PLANWATCH_LOGIN_FAILURES", "10"))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("PLANWATCH_LOCKOUT_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "dashboard.web.context_processors.navigation",
            ],
            # the web layer's tags live in dashboard/web/, not in the app's own
            # templatetags package where Django would look; templates still say
            # {% load planwatch %}
            "libraries": {"planwatch": "dashboard.web.templatetags.planwatch"},
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'planwatch.sqlite3'}",
        conn_max_age=int(os.environ.get("CONN_MAX_AGE", "0")),
    )
}
IS_POSTGRES = DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"


def process_role(argv: list[str]) -> str:
    """``web`` (``manage.py serve``, daphne, uvicorn), ``worker`` (``planwatch_worker``,
    ``procrastinate worker``) or ``command`` (anything else), from the command line."""
    words = {os.path.basename(word) for word in argv[:3]}
    if words & {"serve", "daphne", "runserver", "uvicorn", "hypercorn", "gunicorn"}:
        return "web"
    if words & {"planwatch_worker", "procrastinate"}:
        return "worker"
    return "command"


PROCESS_ROLE = os.environ.get("PLANWATCH_PROCESS_ROLE") or process_role(sys.argv)
if PROCESS_ROLE not in {"web", "worker", "command"}:
    raise ImproperlyConfigured(
        f"unsupported PLANWATCH_PROCESS_ROLE {PROCESS_ROLE!r}; use 'web', 'worker' or 'command'"
    )
# Django's connections by role: a web process's requests and watchers each hold one only
# for a statement (see dashboard/runs/follow.py); a worker's runs write through pools of
# their own (the saver's and the run store's). config/connections.py adds up every pool
# of a process: two web processes and two workers fit PostgreSQL's default 100.
POOL_SIZES = DJANGO_POOL_SIZES
# How long a request waits for a database connection before it is answered with a 503
# that says the database cannot be reached (dashboard.web.middleware): a person is
# waiting, and the page says so within seconds; a worker's writes may wait longer.
DB_WAIT_SECONDS = float(os.environ.get("PLANWATCH_DB_WAIT_SECONDS",
                                       "5" if PROCESS_ROLE == "web" else "30"))
if IS_POSTGRES and not DATABASES["default"]["CONN_MAX_AGE"]:
    # Under ASGI every database_sync_to_async call would otherwise open a new connection
    # (measured: most of the web server's database time); psycopg's pool hands them out.
    # A connection the server dropped (a restart, pg_terminate_backend) is found out on
    # checkout and replaced, rather than failing the request that drew it.
    from config import pgpool

    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": int(os.environ.get("DB_POOL_MAX_SIZE", POOL_SIZES[PROCESS_ROLE])),
        "timeout": DB_WAIT_SECONDS,
        "check": pgpool.check,
    }
    # a server that does not answer at all (a cut network) is given up on as quickly
    DATABASES["default"]["OPTIONS"].setdefault("connect_timeout", max(1, int(DB_WAIT_SECONDS)))
if not IS_POSTGRES:
    # WAL lets the trace view read while a run writes; IMMEDIATE transactions take the
    # write lock up front instead of failing with "database is locked" on upgrade.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
        }
    )
    DATABASES["default"].setdefault("TEST", {})["NAME"] = str(VAR_DIR / "test.sqlite3")
if test_db := os.environ.get("PLANWATCH_TEST_DB_NAME"):
    # Lets two test processes share a PostgreSQL server without sharing a test database.
    DATABASES["default"].setdefault("TEST", {})["NAME"] = (
        test_db if IS_POSTGRES else str(VAR_DIR / f"{test_db}.sqlite3")
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "")
# channels-redis's pub/sub layer sends a process's messages one at a time per connection
# (a lock around each round trip): a worker with many runs queued their doorbells behind
# each other (measured: 84 ms waits at 100 runs). Doorbells are therefore published
# through a layer alias of their own that lists the same server several times (that many
# connections; a group always hashes to the same one, so one run's doorbells stay in
# order). Redis delivers a published message to every subscriber of its channel whatever
# connection it came on, so consumers keep subscribing through "default", on one.
REDIS_CONNECTIONS = int(os.environ.get("PLANWATCH_REDIS_CONNECTIONS", "4"))
if REDIS_CONNECTIONS < 1:
    raise ImproperlyConfigured(
        f"PLANWATCH_REDIS_CONNECTIONS={REDIS_CONNECTIONS} must be 1 or more (4 by default)"
    )
if REDIS_URL:
    # The pub/sub layer never drops silently (RedisChannelLayer's default capacity of 100
    # does); the event log in the database stays the source of truth either way.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        },
        "doorbells": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL] * REDIS_CONNECTIONS},
        },
    }
else:
    # in memory, rung from the in-process executor's own loop: see dashboard/runs/layers.py
    CHANNEL_LAYERS = {"default": {"BACKEND": "dashboard.runs.layers.InProcessChannelLayer"}}

RUN_MAX_ATTEMPTS = int(os.environ.get("PLANWATCH_RUN_MAX_ATTEMPTS", "3"))
if RUN_MAX_ATTEMPTS < 1:
    raise ImproperlyConfigured(
        f"PLANWATCH_RUN_MAX_ATTEMPTS={RUN_MAX_ATTEMPTS} must be 1 or more (3 by default): "
        "the claims of a run that gets on no further before it is failed"
    )
PLANWATCH = {
    # inprocess: runs execute inside the ASGI server; procrastinate: in worker processes.
    "EXECUTOR": os.environ.get("PLANWATCH_EXECUTOR", "inprocess"),
    # How many runs one process executes at once.
    # Slots are asyncio tasks on one loop (a semaphore), not threads or connections: 200
    # model-bound runs streamed to 200 SDK clients at once finished with no error (PostgreSQL).
    "MAX_CONCURRENT_RUNS": int(os.environ.get("PLANWATCH_MAX_CONCURRENT_RUNS", "200")),
    # PostgreSQL connections of a process's run executor: its checkpoint saver's pool (and
    # half as many for its event log's). Each write holds one only briefly (20 served 200
    # runs; the served tests run on 6). With Django's pool (DB_POOL_MAX_SIZE) this is what
    # one process may open of the server's max_connections (see config/connections.py).
    "RUN_DB_POOL_SIZE": int(os.environ.get("PLANWATCH_RUN_DB_POOL_SIZE",
                                           str(DEFAULT_RUN_DB_POOL_SIZE))),
    # Seconds a checkpoint write that fails for a transient reason (a dropped connection,
    # no pooled connection to be had) is tried again, with back-off, before the run fails.
    # 30 s: a pool re-opening every connection after a storm of backend kills, on a busy
    # machine, took longer than 10 s (the chaos test's runs failed with PoolTimeout).
    "CHECKPOINT_RETRY_SECONDS": float(os.environ.get("PLANWATCH_CHECKPOINT_RETRY_SECONDS",
                                                     "30")),
    # Streams (SSE responses, trace websockets) one user, and one web process, may hold
    # open at once; past either the next is refused (429, websocket close code 4429).
    "MAX_STREAMS_PER_USER": int(os.environ.get("PLANWATCH_MAX_STREAMS_PER_USER", "500")),
    "MAX_STREAMS_PER_PROCESS": int(os.environ.get("PLANWATCH_MAX_STREAMS_PER_PROCESS", "2000")),
    # Every this many seconds a LangGraph SSE stream sends a ": heartbeat" comment and a
    # waiting /wait or /join response a newline (LangGraph's server: every 5 s), so proxies
    # do not close a response waiting on a long node.
    "STREAM_KEEPALIVE_SECONDS": float(os.environ.get("PLANWATCH_STREAM_KEEPALIVE_SECONDS",
                                                     "5")),
    # Seconds a web process keeps an API token's check (its user, their permissions) that
    # passed, so a client's requests do not each read them again (dashboard/api/auth.py);
    # a change seen by this process forgets them at once, one made elsewhere (another
    # process, a bulk UPDATE) takes effect within this. 0: check every request afresh.
    "AUTH_CACHE_SECONDS": float(os.environ.get("PLANWATCH_AUTH_CACHE_SECONDS", "5")),
    # Runs one user may have queued (waiting for a slot) at once; past it, 429.
    "MAX_QUEUED_RUNS_PER_USER": int(os.environ.get("PLANWATCH_MAX_QUEUED_RUNS_PER_USER",
                                                   "1000")),
    # LangGraph's recursion limit (super-steps) of a run that asks for none; a client's own
    # config.recursion_limit is taken as LangGraph's server takes it (any whole number).
    # PLANWATCH_MAX_RECURSION_LIMIT is its name before it stopped bounding a client's.
    "RECURSION_LIMIT": int(os.environ.get(
        "PLANWATCH_RECURSION_LIMIT", os.environ.get("PLANWATCH_MAX_RECURSION_LIMIT", "1000"))),
    # "scripted" (offline, deterministic) or "package.module:factory" for a chat model.
    "LLM": os.environ.get("PLANWATCH_LLM", "scripted"),
    # The OpenAI-compatible (or other) server a "provider:model" LLM setting calls; empty:
    # the provider's own default (or its usual variable, OPENAI_BASE_URL …).
    "LLM_BASE_URL": os.environ.get("PLANWATCH_LLM_BASE_URL", ""),
    # seconds a model call may take before it fails (the graph's own fallbacks then apply)
    "LLM_TIMEOUT": float(os.environ.get("PLANWATCH_LLM_TIMEOUT", "120")),
    # Seconds the scripted model "thinks" per call, so live runs are watchable.
    "THINK_TIME": float(os.environ.get("PLANWATCH_THINK_TIME", "0.4")),
    # A running run whose heartbeat is older than this is taken to be orphaned.
    # a dead executor's runs are taken over within STALE_AFTER + one sweep (about 6-8 s);
    # heartbeats run on the executor's loop, beside async nodes, so a busy one still beats
    "HEARTBEAT_SECONDS": float(os.environ.get("PLANWATCH_HEARTBEAT_SECONDS", "2")),
    "STALE_AFTER_SECONDS": float(os.environ.get("PLANWATCH_STALE_AFTER_SECONDS", "6")),
    # Claims of a run without getting on (no checkpoint written since it started, resumed
    # or last got on): past them, a run whose executor died or lost the database each
    # time is failed, naming them and its last error, instead of recovered for ever.
    "RUN_MAX_ATTEMPTS": RUN_MAX_ATTEMPTS,
    # PostgreSQL: seconds a transaction of the executor's pools (checkpoint writes, the
    # run store) may sit idle before the server ends it (a frozen executor's write held
    # its run's row, and every claim of it waited); 0: never.
    "IDLE_TRANSACTION_SECONDS": float(os.environ.get("PLANWATCH_IDLE_TRANSACTION_SECONDS",
                                                     "60")),
    # Seconds a stopping process (SIGTERM) lets its runs reach their next node boundary
    # before it cancels them where they are; either way another process takes them over.
    "DRAIN_SECONDS": float(os.environ.get("PLANWATCH_DRAIN_SECONDS", "10")),
    # Modules that register a user's own graphs (planner.registry.register) on import.
    # the graphs the registry loads (each module names its GraphSpec SPEC)
    "GRAPH_MODULES": env_list("PLANWATCH_GRAPH_MODULES",
                              "planner.acquisition,planner.decomposition"),
    # LangGraph's checkpoint durability: "async" (its default: a step's checkpoint is
    # written while the next step runs; all are written before a run stops or pauses),
    # "sync" (each step waits for its checkpoint) or "exit" (only when the run stops).
    # a langgraph.json whose graphs are served beside the built-in planners
    "LANGGRAPH_CONFIG": os.environ.get("PLANWATCH_LANGGRAPH_CONFIG", ""),
    "DURABILITY": os.environ.get("PLANWATCH_DURABILITY", "async"),
    # PostgreSQL: wait for the WAL flush on every event commit too (checkpoints always do).
    "SYNC_EVENT_COMMITS": env_bool("PLANWATCH_SYNC_EVENT_COMMITS", False),
    # Seconds between two event writes of one run: the first events after a quiet spell
    # go at once, a burst of fast steps is written in batches this far apart.
    "EVENT_WRITE_INTERVAL": float(os.environ.get("PLANWATCH_EVENT_WRITE_INTERVAL", "0.005")),
    # Crons one user may keep; past it, creating one is refused (429).
    "MAX_CRONS_PER_USER": int(os.environ.get("PLANWATCH_MAX_CRONS_PER_USER", "100")),
    # Seconds between two looks for due crons (LangGraph's scheduled runs).
    "CRON_POLL_SECONDS": float(os.environ.get("PLANWATCH_CRON_POLL_SECONDS", "5")),
    # Model calls: record prompts and answers (false keeps only metadata: model, tokens,
    # latency), each text cut at TRACE_CONTENT_LIMIT characters.
    "TRACE_CONTENT": env_bool("PLANWATCH_TRACE_CONTENT", True),
    # false: no model-call events at all (the bench measures the capture's cost with it)
    "MODEL_CALLS": env_bool("PLANWATCH_MODEL_CALLS", True),
    "TRACE_CONTENT_LIMIT": int(os.environ.get("PLANWATCH_TRACE_CONTENT_LIMIT", "20000")),
    # model -> {"input": USD per million tokens, "output": USD per million tokens}
    "MODEL_PRICES": model_prices(os.environ.get("PLANWATCH_MODEL_PRICES", "")),
    # Every run's budgets unless its graph, assistant or request says otherwise (README,
    # "Budgets"): {"max_tokens", "max_cost_usd", "max_model_calls", "max_working_minutes",
    # "max_wall_minutes", "on_limit": "pause" | "stop" | {by budget}, "warn_at": 0.8}
    "BUDGET": json_object("PLANWATCH_BUDGET"),
    # Days after which finished runs (events, checkpoints) and model-call texts are pruned
    # by the web processes' cron poll, hourly; 0 keeps everything (manage.py prune by hand).
    "RETENTION_DAYS": float(os.environ.get("PLANWATCH_RETENTION_DAYS", "0")),
    # a periodic prune keeps each run's row, its questions and answers, its lifecycle events
    "RETENTION_KEEP_AUDIT": env_bool("PLANWATCH_RETENTION_KEEP_AUDIT", False),
    # /metrics: scraped with "Authorization: Bearer <token>" or from these networks (CIDR;
    # by default loopback only: a Prometheus on another host needs one or the other)
    "METRICS_TOKEN": os.environ.get("PLANWATCH_METRICS_TOKEN", ""),
    "METRICS_NETWORKS": env_list("PLANWATCH_METRICS_NETWORKS", "127.0.0.0/8,::1/128"),
    # an OTLP/HTTP traces endpoint (http://host:6006/v1/traces): each run becomes a trace
    "OTLP_ENDPOINT": os.environ.get("PLANWATCH_OTLP_ENDPOINT", ""),
    # Notices of questions (dashboard/notices.py). E-mail goes out only when Django's mail
    # is configured here (EMAIL_HOST or EMAIL_BACKEND), the webhook only with its URL; the
    # secret signs each call (HMAC-SHA256). Links in them start with BASE_URL.
    "NOTIFY_EMAIL": bool(os.environ.get("EMAIL_HOST") or os.environ.get("EMAIL_BACKEND")),
    "WEBHOOK_URL": os.environ.get("PLANWATCH_WEBHOOK_URL", ""),
    "WEBHOOK_SECRET": os.environ.get("PLANWATCH_WEBHOOK_SECRET", ""),
    "BASE_URL": os.environ.get("PLANWATCH_BASE_URL", "http://127.0.0.1:8000"),
    # seconds between two looks for new questions, due deadlines and notices to send
    "NOTICE_POLL_SECONDS": float(os.environ.get("PLANWATCH_NOTICE_POLL_SECONDS", "1")),
    # a failed notice is tried again after this, doubling each time (at most 5 min), until
    # NOTICE_ATTEMPTS tries have failed
    "NOTICE_RETRY_SECONDS": float(os.environ.get("PLANWATCH_NOTICE_RETRY_SECONDS", "5")),
    "NOTICE_ATTEMPTS": int(os.environ.get("PLANWATCH_NOTICE_ATTEMPTS", "6")),
    # one e-mail per person per this many seconds: the questions asked meanwhile wait for
    # the next one, a digest (dashboard/notices.py)
    "NOTICE_DIGEST_SECONDS": float(os.environ.get("PLANWATCH_NOTICE_DIGEST_SECONDS", "300")),
    # days an e-mail's one-time link stays valid
    "NOTICE_LINK_DAYS": float(os.environ.get("PLANWATCH_NOTICE_LINK_DAYS", "7")),
}
# Django's own mail settings, by their own names (nothing is sent unless EMAIL_HOST is set)
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = int(os.environ.get("EMAIL_TIMEOUT", "10"))
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "planwatch@localhost")
if PLANWATCH["DURABILITY"] not in {"async", "sync", "exit"}:
    raise ImproperlyConfigured(
        f"unsupported PLANWATCH_DURABILITY {PLANWATCH['DURABILITY']!r}; use 'async', 'sync' "
        "or 'exit'"
    )
if PLANWATCH["EXECUTOR"] not in {"inprocess", "procrastinate"}:
    raise ImproperlyConfigured(
        f"unsupported PLANWATCH_EXECUTOR {PLANWATCH['EXECUTOR']!r}; use 'inprocess' or "
        "'procrastinate'"
    )
if IS_POSTGRES:
    # procrastinate's queue lives in PostgreSQL; its tables exist on every PostgreSQL
    # deployment so switching PLANWATCH_EXECUTOR needs no further migration.
    INSTALLED_APPS.insert(INSTALLED_APPS.index("dashboard"), "procrastinate.contrib.django")
    # the jobs live in the run engine's package, not in an app's tasks.py
    PROCRASTINATE_AUTODISCOVER_MODULE_NAME = ""
    PROCRASTINATE_IMPORT_PATHS = ["dashboard.runs.jobs"]
    PROCRASTINATE_WORKER_DEFAULTS = {
        "update_heartbeat_interval": PLANWATCH["HEARTBEAT_SECONDS"],
        "stalled_worker_timeout": PLANWATCH["STALE_AFTER_SECONDS"],
    }
elif PLANWATCH["EXECUTOR"] == "procrastinate":
    raise ImproperlyConfigured(
        "PLANWATCH_EXECUTOR=procrastinate needs PostgreSQL (its job queue lives there); "
        "set DATABASE_URL=postgres://… or use PLANWATCH_EXECUTOR=inprocess"
    )

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:runs"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns about a missing root on every start
WHITENOISE_USE_FINDERS = True  # serve straight from static/ without collectstatic

# Bound what a request may carry: a 1 MB answer is refused with a clear error, not a 500.
DATA_UPLOAD_MAX_MEMORY_SIZE = 256 * 1024

# -- TLS and browser hardening ------------------------------------------------------------
# PLANWATCH_HTTPS=true (behind TLS, directly or through a proxy that sets
# X-Forwarded-Proto) turns on every TLS setting at once; `manage.py check --deploy` passes.
HTTPS = env_bool("PLANWATCH_HTTPS", False)
if HTTPS:
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("PLANWATCH_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
# Django's own Content Security Policy: scripts only from this server (no inline script
# anywhere); styles also inline, because Mermaid writes <style> into the graph's SVG.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "font-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "worker-src": [CSP.SELF, "blob:"],  # Redoc parses the schema in a worker
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

# Browser clients of LangGraph's server API on other origins (Agent Chat UI, Agent Inbox):
# PLANWATCH_CORS_ORIGINS=https://chat.example.com,http://localhost:3000. Only /langgraph/
# answers them; they authenticate with x-api-key (no cookies are sent across origins).
CORS_ALLOWED_ORIGINS = env_list("PLANWATCH_CORS_ORIGINS", "")
CORS_URLS_REGEX = r"^/langgraph/.*$"
CORS_ALLOW_HEADERS = (*default_cors_headers, "x-api-key", "last-event-id")
CORS_EXPOSE_HEADERS = ["content-location", "location"]
CORS_ALLOW_CREDENTIALS = False

REST_FRAMEWORK = {
    # Token first: an anonymous request then gets 401 with `WWW-Authenticate: Token`.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "dashboard.api.auth.TokenAuthentication",  # knox's, one query a request
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON only: DRF parses it from Django's body, bounded by DATA_UPLOAD_MAX_MEMORY_SIZE;
    # every value is then bounded (finite numbers, 64-bit integers, depth; no NUL).
    "DEFAULT_PARSER_CLASSES": ["dashboard.api.parsers.BoundedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "EXCEPTION_HANDLER": "dashboard.api.exceptions.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
# API tokens: `Authorization: Token <key>`; the key is shown once, stored as a digest,
# and expires after PLANWATCH_TOKEN_TTL_HOURS (30 days by default).
REST_KNOX = {
    "TOKEN_TTL": timedelta(hours=float(os.environ.get("PLANWATCH_TOKEN_TTL_HOURS", "720"))),
    "AUTH_HEADER_PREFIX": "Token",
    "AUTO_REFRESH": False,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Planwatch API",
    "DESCRIPTION": "Start, watch, answer and audit LangGraph planner runs.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # a run's and a thread's statuses are both called "status": name the run's set
    "ENUM_NAME_OVERRIDES": {"RunStatusEnum": "dashboard.models.Run.Status",
                            "RunOutcomeEnum": "dashboard.models.Run.Outcome"},
    # /langgraph/ has its own document (dashboard/lgserver/openapi.py)
    "PREPROCESSING_HOOKS": ["dashboard.lgserver.openapi.without_langgraph"],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "dashboard.api.schema.add_error_responses",
    ],
}

# plain: daphne's access log and text lines; json: one JSON object a line (config/jsonlog.py)
# for every record, a request's (planwatch.requests) and a run transition's
# (planwatch.transitions) included, each with the run id it concerns
LOG_FORMAT = os.environ.get("PLANWATCH_LOG_FORMAT", "plain")
if LOG_FORMAT not in {"plain", "json"}:
    raise ImproperlyConfigured(
        f"unsupported PLANWATCH_LOG_FORMAT {LOG_FORMAT!r}; use 'plain' or 'json'")
# the requests' and transitions' records: one line each, only when asked for in JSON
_EVERY_REQUEST = "INFO" if LOG_FORMAT == "json" else "WARNING"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
                   "json": {"()": "config.jsonlog.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "loggers": {
        "planwatch": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
        "planwatch.requests": {"level": _EVERY_REQUEST},
        "planwatch.transitions": {"level": _EVERY_REQUEST},
        # a 4xx is an ordinary answer (a wrong value, a missing page), not a warning:
        # Django logs those at WARNING and server errors at ERROR; only the latter are kept
        "django.request": {
            "handlers": ["console"], "level": os.environ.get("REQUEST_LOG_LEVEL", "ERROR"),
            "propagate": False,
        },
        "procrastinate": {
            "handlers": ["console"], "level": os.environ.get("PROCRASTINATE_LOG_LEVEL", "WARNING"),
        },
    },
}
