"""Pooled PostgreSQL connections are checked on checkout without a round trip, and a
connection the server dropped is still found out."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest
from django.db import connection

from config import pgpool
from tests.conftest import database_url

pytestmark = [pytest.mark.pg, pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def pg() -> str:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's pools; this runs in the PostgreSQL pass")
    return database_url(connection.settings_dict)


def terminate(conn: psycopg.Connection | psycopg.AsyncConnection) -> None:
    """The server drops ``conn`` (as on a restart), and its last message has arrived."""
    with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,)
                             ).fetchone() == (True,)
    for _ in range(100):
        if pgpool.needs_check(conn):
            return
        time.sleep(0.01)


def test_a_live_idle_connection_is_handed_out_without_a_query(pg, monkeypatch):
    checked = []
    monkeypatch.setattr(pgpool.ConnectionPool, "check_connection", checked.append)
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute("SELECT 1")
        pgpool.check(conn)
        assert checked == []  # no round trip for a connection with nothing to read
        terminate(conn)
        pgpool.check(conn)
        assert checked == [conn]  # the real check, once the server has dropped it


def test_a_socket_numbered_past_1024_is_polled_not_taken_for_broken():
    """A process with many sockets open gets descriptors past select()'s 1024: a live idle
    connection there still needs no round trip, and one with something to read does."""
    import os
    import socket
    import types

    high = 1500
    ours, theirs = socket.socketpair()
    try:
        os.dup2(ours.fileno(), high)
        conn = types.SimpleNamespace(fileno=lambda: high)
        assert not pgpool.needs_check(conn)
        theirs.sendall(b"E")  # the server's last message
        assert pgpool.needs_check(conn)
    finally:
        os.close(high)
        ours.close()
        theirs.close()


def test_a_dropped_connection_is_found_out_on_checkout(pg):
    with psycopg.connect(pg, autocommit=True) as conn:
        terminate(conn)
        assert pgpool.needs_check(conn)
        with pytest.raises(psycopg.OperationalError):
            pgpool.check(conn)

    async def dropped_async() -> None:
        async with await psycopg.AsyncConnection.connect(pg, autocommit=True) as aconn:
            await asyncio.to_thread(terminate, aconn)
            with pytest.raises(psycopg.OperationalError):
                await pgpool.acheck(aconn)

    asyncio.run(dropped_async())


def test_a_pool_replaces_a_dropped_connection(pg):
    from psycopg_pool import ConnectionPool

    with ConnectionPool(pg, min_size=1, max_size=1, check=pgpool.check,
                        kwargs={"autocommit": True}) as pool:
        with pool.connection() as conn:
            first = conn.info.backend_pid
        terminate_pid(first)
        with pool.connection() as conn:  # not the dead one: a new connection, working
            assert conn.execute("SELECT 1").fetchone() == (1,)
            assert conn.info.backend_pid != first


def terminate_pid(pid: int) -> None:
    with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    time.sleep(0.2)  # the server's last message reaches the pooled socket
