"""A database busy past its timeout is a 503 with Retry-After, never a 500, in the REST API
and in the LangGraph API; the same request sent again once it is free succeeds."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client

from dashboard.models import Run, Thread
from dashboard.runs.savers import postgres_conninfo
from tests.conftest import api_token
from tests.lgserver.conftest import PERMS

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]

TABLES = (Run._meta.db_table, Thread._meta.db_table)


@contextmanager
def writes_held() -> Iterator[None]:
    """Another connection holds the write lock (SQLite: the database's; PostgreSQL: the
    run and thread tables'), and this thread's waits for it last 100 ms, not 30 s."""
    if connection.vendor == "sqlite":
        other = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        short = "PRAGMA busy_timeout = 100"
    else:
        import psycopg

        other = psycopg.connect(postgres_conninfo())
        other.execute(f"LOCK TABLE {', '.join(TABLES)} IN EXCLUSIVE MODE")  # reads go on
        short = "SET lock_timeout = '100ms'"

    def impatient(execute, sql, params, many, context):
        context["cursor"].cursor.execute(short)  # whichever pooled connection it is
        return execute(sql, params, many, context)

    try:
        with connection.execute_wrapper(impatient):
            yield
    finally:
        other.rollback()
        other.close()
        if connection.vendor == "sqlite":
            if connection.connection is not None:
                with connection.cursor() as cursor:
                    cursor.execute("PRAGMA busy_timeout = 30000")
        elif connection.pool is not None:
            # the request gave its connection back to the pool with the short timeout:
            # no later statement (the test database's flush, say) may draw it
            connection.close_pool()
        elif connection.connection is not None:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")


@pytest.fixture
def user(django_user_model):
    user = django_user_model.objects.create_user(username="busy", password="pw-busy-12345")
    user.user_permissions.set(Permission.objects.filter(codename__in=PERMS))
    return user


@pytest.mark.parametrize(("path", "data", "header"), [
    ("/api/runs/", {"graph": "acquisition", "input": {"region": "France"}}, "Authorization"),
    ("/langgraph/threads", {"metadata": {"who": "busy"}}, "x-api-key"),
])
def test_a_busy_database_is_a_503_to_retry_and_the_retry_succeeds(user, path, data, header,
                                                                  executor):
    # (the executor: the run the retry starts is executed, and stopped before the flush)
    token = api_token(user)
    client = Client(headers={header: f"Token {token}" if header == "Authorization" else token})
    with writes_held():
        response = client.post(path, json.dumps(data), content_type="application/json")
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "5"
    body = response.json()
    assert body["code"] == "database_busy"
    assert "database is busy" in body["detail"] and "retry in 5 seconds" in body["detail"]
    assert not Run.objects.exists() and not Thread.objects.exists()  # nothing half-stored

    response = client.post(path, json.dumps(data), content_type="application/json")
    assert response.status_code in (200, 201), response.content
