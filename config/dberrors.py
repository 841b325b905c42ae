"""What a database error means, told by the drivers' exception types (psycopg's, psycopg_pool's,
sqlite3's and Django's wrappers of them), in one place: the connection was dropped under
a statement, the database was busy past its timeout, the transaction lost a deadlock, or
the statement may pass if tried again; and the one retry of a transaction the database
rolled back as a deadlock's victim.

Django wraps a driver's error in its own (``django.db.utils.OperationalError``) with the
driver's as ``__cause__``; a pool's or a saver's connection raises the driver's own. So
each question looks at the error, its cause and its context.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import psycopg
from django.db import utils as django_db
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

# Django's and the drivers' (the run store's and the savers' connections are not Django's)
OPERATIONAL = (django_db.OperationalError, psycopg.OperationalError, sqlite3.OperationalError)
INTERFACE = (django_db.InterfaceError, psycopg.InterfaceError, sqlite3.InterfaceError)

# The server dropped the connection (a restart, ``pg_terminate_backend``, a network cut, a
# transaction left idle past ``idle_in_transaction_session_timeout``): a pool may hand one
# out before the server's goodbye reaches its socket.
LOST = (pg_errors.AdminShutdown, pg_errors.ConnectionFailure, pg_errors.ConnectionTimeout,
        pg_errors.IdleInTransactionSessionTimeout, *INTERFACE)
LOST_MESSAGES = ("terminating connection", "server closed the connection",
                 "connection is closed", "connection already closed", "consuming input failed",
                 "connection is lost", "the connection is bad", "ssl connection has been closed")

# PostgreSQL's lock_timeout, a deadlock's victim, the connection pool's wait
BUSY = (PoolTimeout, pg_errors.LockNotAvailable, pg_errors.DeadlockDetected)
# SQLite's busy timeout ran out
BUSY_MESSAGES = ("database is locked", "database table is locked", "database is busy")

# the database rolled the whole transaction back; the same transaction again may pass
ROLLED_BACK = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc``, the error it was raised from and the one it was raised while handling."""
    return [c for c in (exc, exc.__cause__, exc.__context__) if c is not None]


def caused_by(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> bool:
    """Whether ``exc``, or the driver's error under it, is one of ``kinds``."""
    return any(isinstance(c, kinds) for c in _chain(exc))


def connection_lost(exc: BaseException | None) -> bool:
    """Whether ``exc`` (a driver's or Django's database error) says the connection was
    dropped under the statement: a fresh connection would do, nothing is wrong with it."""
    if exc is None:
        return False
    if caused_by(exc, LOST):  # (the idle transaction's is psycopg's InternalError)
        return True
    return caused_by(exc, (*OPERATIONAL, *INTERFACE)) and any(
        m in str(c).lower() for c in _chain(exc) for m in LOST_MESSAGES)


# no connection could be had: the server refused or did not answer, the pool's wait ran out
UNREACHABLE_MESSAGES = ("could not connect", "connection refused", "connection failed",
                        "couldn't get a connection", "timeout expired",
                        "unable to open database file", "no route to host")


def database_unreachable(exc: BaseException | None) -> bool:
    """Whether ``exc`` says the database could not be reached at all (refused, no answer,
    the pool's wait for a connection ran out) or dropped the connection under the
    statement: the request failed for the database, not for its own fault."""
    if exc is None or not caused_by(exc, (*OPERATIONAL, *INTERFACE, PoolTimeout)):
        return False
    return connection_lost(exc) or caused_by(exc, (PoolTimeout,)) or any(
        m in str(c).lower() for c in _chain(exc) for m in UNREACHABLE_MESSAGES)


def transient(exc: BaseException) -> bool:
    """Whether a statement's error may pass if it is tried again: a dropped connection
    (:func:`connection_lost`), no connection to be had (``PoolTimeout``, too many clients),
    a busy SQLite file. A value the database cannot store is not."""
    return connection_lost(exc) or isinstance(
        exc, psycopg.OperationalError | psycopg.InterfaceError | sqlite3.OperationalError)


def database_busy(exc: BaseException) -> bool:
    """Whether ``exc`` says the database was busy past its timeout (not that it is broken)."""
    if not isinstance(exc, OPERATIONAL):
        return False
    return caused_by(exc, BUSY) or any(m in str(exc).lower() for m in BUSY_MESSAGES)


def retried[T](transaction: Callable[[], T], *, attempts: int) -> T:
    """``transaction()``, again while the database rolls it back as a deadlock's victim or
    a serialisation conflict's (:data:`ROLLED_BACK`), ``attempts`` times at the most; the
    last attempt's error is raised (an API answers it 503 with ``Retry-After``)."""
    for attempt in range(1, attempts + 1):
        try:
            return transaction()
        except OPERATIONAL as exc:
            if attempt == attempts or not caused_by(exc, ROLLED_BACK):
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")
