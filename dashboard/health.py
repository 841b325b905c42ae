"""Readiness: can this process serve? Its database, channel layer and executor, each asked
cheaply and within :data:`PROBE_TIMEOUT` seconds.

``/readyz`` (:mod:`dashboard.web.probes`) answers 503 naming every check that is down.
The checks are what this process needs to serve a request and run a run: the database
(``SELECT 1`` on a connection drawn from the pool, or opened, within the timeout), the
channel layer (a Redis ``PING`` when ``REDIS_URL`` is set; the in-memory layer is always
there) and, where runs execute in this process, the executor (its loop thread alive and
its heartbeat loop gone round within ``STALE_AFTER_SECONDS``), and in a web process its
background duties (:mod:`dashboard.duties`) going round. With procrastinate the
workers' heartbeats are reported but do not fail a web process's readiness: a balancer
would take every web process out while workers restart, and requests still queue runs.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from dashboard.duty_beats import duties_seen
from dashboard.runs import dispatch
from dashboard.runs.conf import planwatch_setting

PROBE_TIMEOUT = 2.0
"""Seconds one check may take before it counts as down (a balancer probes every few)."""


@dataclass(frozen=True)
class Check:
    """One thing readiness needs: whether it is up, and what was seen."""

    name: str
    ok: bool
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Readiness:
    """Every check of this process; ready when every one that counts is up."""

    checks: tuple[Check, ...]

    @property
    def ready(self) -> bool:
        """Whether every check is up."""
        return all(check.ok for check in self.checks)

    @property
    def down(self) -> list[str]:
        """The names of the checks that are down."""
        return [check.name for check in self.checks if not check.ok]

    def as_json(self) -> dict[str, Any]:
        """The answer ``/readyz`` sends."""
        return {"status": "ready" if self.ready else "unavailable", "down": self.down,
                "checks": {c.name: {"ok": c.ok, **c.detail} for c in self.checks}}


def readiness(*, database: BaseDatabaseWrapper | None = None) -> Readiness:
    """Ask the database (``database``: the connection to ask, Django's default one unless
    given), the channel layer and the executor."""
    return Readiness(checks=(check_database(connections["default"] if database is None
                                            else database),
                             check_channel_layer(),
                             check_executor(),
                             check_duties()))


def check_database(connection: BaseDatabaseWrapper) -> Check:
    """``SELECT 1`` through ``connection``, drawing a pooled connection within
    :data:`PROBE_TIMEOUT` (Django would wait the pool's own 30 s)."""
    try:
        pool = getattr(connection, "pool", None) if connection.vendor == "postgresql" else None
        if pool is not None:
            pool.open()  # as Django's first connection does; idempotent
            with pool.connection(timeout=PROBE_TIMEOUT) as conn:
                conn.execute("SELECT 1")
        else:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
    except Exception as exc:  # any failure is the answer, named
        return Check("database", False, {"error": _error(exc)})
    return Check("database", True, {"vendor": connection.vendor})


_redis_lock = threading.Lock()
_redis: Any = None


def check_channel_layer() -> Check:
    """A Redis ``PING`` when the channel layer is Redis's; the in-process layer is up."""
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return Check("channel_layer", True, {"backend": "in-process"})
    global _redis
    try:
        with _redis_lock:
            if _redis is None:
                import redis

                _redis = redis.Redis.from_url(url, socket_timeout=PROBE_TIMEOUT,
                                              socket_connect_timeout=PROBE_TIMEOUT)
            _redis.ping()
    except Exception as exc:
        return Check("channel_layer", False, {"backend": "redis", "error": _error(exc)})
    return Check("channel_layer", True, {"backend": "redis"})


def check_executor() -> Check:
    """In-process: the executor's loop alive and its heartbeat loop recent (not started
    yet is up: it starts on the first run). Procrastinate: the workers seen alive."""
    if not dispatch.in_process():
        alive, stalled = workers_seen()
        detail: dict[str, Any] = {"mode": "procrastinate", "workers_alive": alive,
                                  "workers_stalled": stalled}
        if alive == 0:
            detail["warning"] = ("no worker's heartbeat is recent: runs stay queued until a "
                                 "worker (manage.py planwatch_worker) runs and reaches the "
                                 "database")
        elif stalled:
            detail["warning"] = (f"{stalled} worker(s) registered but not beating: stopped, "
                                 "or cut off from the database; they are pruned and register "
                                 "again when they come back")
        return Check("executor", True, detail)
    health = dispatch.executor_health()
    if health is None:
        return Check("executor", True, {"mode": "inprocess", "started": False})
    stale_after = float(planwatch_setting("STALE_AFTER_SECONDS"))
    detail = {"mode": "inprocess", "started": True, "slots": health.slots,
              "busy": health.busy, "heartbeat_age": health.beat_age}
    if not health.alive:
        return Check("executor", False, {**detail, "error": "its loop thread has stopped"})
    if health.beat_age is not None and health.beat_age > stale_after:
        return Check("executor", False, {
            **detail, "error": f"its heartbeat loop last went round {health.beat_age:.1f} s "
                               f"ago (STALE_AFTER_SECONDS={stale_after:g}): its loop is stuck"})
    return Check("executor", True, detail)


def check_duties() -> Check:
    """In a web process, its background duties (crons, deadlines and notices) running, their
    loops going round; another process (a worker, a command) runs none and says so."""
    if settings.PROCESS_ROLE != "web":
        return Check("duties", True, {"running": False, "role": settings.PROCESS_ROLE})
    seen = duties_seen()
    detail: dict[str, Any] = {duty.name: {"ok": duty.ok, "last_round_age": duty.age,
                                          **({"error": duty.problem} if duty.problem else {})}
                              for duty in seen}
    return Check("duties", all(duty.ok for duty in seen), detail)


def workers_seen() -> tuple[int | None, int | None]:
    """procrastinate workers whose heartbeat is within ``STALE_AFTER_SECONDS``, and those
    registered whose heartbeat is older (None: the question could not be asked)."""
    stale_after = float(planwatch_setting("STALE_AFTER_SECONDS"))
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FILTER (WHERE last_heartbeat > now() - make_interval(secs "
                "=> %s)), count(*) FILTER (WHERE last_heartbeat <= now() - make_interval(secs "
                "=> %s)) FROM procrastinate_workers", [stale_after, stale_after])
            row = cursor.fetchone()
    except Exception:
        return None, None
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _error(exc: BaseException) -> str:
    """An exception as one line: its type and first line."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
