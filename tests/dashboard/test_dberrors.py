"""What a database error means (``config.dberrors``), told by the drivers' exception types
under Django's wrappers; the real faults (a dropped connection, a busy database) are
driven in test_database_busy.py, runs/test_pgpool.py and security/test_faults.py."""

from __future__ import annotations

import sqlite3

import pytest
from django.db import utils as django_db
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from config import dberrors


def wrapped(driver_error: BaseException) -> django_db.OperationalError:
    """``driver_error`` as Django raises it: its own error, the driver's as the cause."""
    try:
        try:
            raise driver_error
        except Exception as exc:
            raise django_db.OperationalError(str(exc)) from exc
    except django_db.OperationalError as outer:
        return outer


def test_a_deadlocks_victim_is_decided_again_and_the_last_attempt_raises():
    tries: list[int] = []

    def twice_a_victim() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise wrapped(pg_errors.DeadlockDetected("deadlock detected"))
        return "decided"

    assert dberrors.retried(twice_a_victim, attempts=3) == "decided"
    assert len(tries) == 3
    tries.clear()
    with pytest.raises(django_db.OperationalError):
        dberrors.retried(twice_a_victim, attempts=2)
    assert len(tries) == 2


def test_what_a_retry_would_not_mend_is_raised_at_once():
    tries: list[int] = []

    def refused() -> None:
        tries.append(1)
        raise wrapped(pg_errors.LockNotAvailable("could not obtain lock"))

    with pytest.raises(django_db.OperationalError):
        dberrors.retried(refused, attempts=3)
    assert len(tries) == 1
    with pytest.raises(ValueError):
        dberrors.retried(lambda: int("x"), attempts=3)


@pytest.mark.parametrize(("error", "busy", "lost"), [
    (wrapped(PoolTimeout("couldn't get a connection after 30 sec")), True, False),
    (wrapped(pg_errors.LockNotAvailable("canceling statement due to lock timeout")), True,
     False),
    (wrapped(sqlite3.OperationalError("database is locked")), True, False),
    (django_db.OperationalError("database is locked"), True, False),
    (wrapped(pg_errors.AdminShutdown("terminating connection due to administrator command")),
     False, True),
    (django_db.InterfaceError("connection already closed"), False, True),
    # an executor's transaction left idle: the server ended it (and closed the connection)
    (pg_errors.IdleInTransactionSessionTimeout(
        "terminating connection due to idle-in-transaction timeout"), False, True),
    (pg_errors.InternalError_("terminating connection, said in an unrelated error"), False,
     False),
    (wrapped(pg_errors.UndefinedTable('relation "x" does not exist')), False, False),
    (django_db.IntegrityError("duplicate key"), False, False),
    (ValueError("database is locked"), False, False),
])
def test_busy_and_lost_are_told_by_type_under_djangos_wrapper(error, busy, lost):
    assert dberrors.database_busy(error) is busy
    assert dberrors.connection_lost(error) is lost
