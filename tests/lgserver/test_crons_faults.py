"""Crons under faults: schedules with no time to come, a poisoned cron among good ones, the
scheduler's database connection killed under it."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from dashboard import crons
from dashboard.models import Cron
from tests.conftest import api_token, database_url

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]

NEVER_AGAIN = ["0 0 31 2 *", "0 0 30 2 *", "23 22 26 11 * 0 2026"]
"""Valid cron expressions with no time to come (a 7th field is croniter's year)."""


@pytest.mark.parametrize("schedule", NEVER_AGAIN)
def test_a_schedule_that_never_fires_again_is_refused_on_create_and_patch(
        client, operator, schedule):
    headers = {"x-api-key": api_token(operator)}
    cron = crons.cron_create(assistant_id="acquisition", schedule="0 3 * * *",
                             user=operator, thread=None, payload={})
    made = client.post("/langgraph/runs/crons", {"assistant_id": "acquisition",
                                                  "schedule": schedule},
                       content_type="application/json", headers=headers)
    assert made.status_code == 422, made.content[:300]
    assert schedule in made.content.decode() and "never fires" in made.content.decode()
    patched = client.patch(f"/langgraph/runs/crons/{cron.id}", {"schedule": schedule},
                           content_type="application/json", headers=headers)
    assert patched.status_code == 422, patched.content[:300]
    assert schedule in patched.content.decode()
    assert Cron.objects.get().schedule == "0 3 * * *"


def test_a_poisoned_cron_is_marked_broken_and_the_others_still_fire(operator, monkeypatch,
                                                                     client):
    fired: list[str] = []
    monkeypatch.setattr(crons, "_start", lambda cron: fired.append(cron.schedule))
    # due tomorrow, polled as if tomorrow: a served scheduler polling now leaves them be
    now = timezone.now() + timedelta(days=1)
    past = now - timedelta(seconds=2)
    # accepted before it went bad: a year-bound schedule whose last time has gone by
    bad = Cron.objects.create(assistant_id="acquisition", schedule="23 22 26 11 * 0 2026",
                              next_run_date=past - timedelta(seconds=1), user=operator)
    good = Cron.objects.create(assistant_id="acquisition", schedule="* * * * * *",
                               next_run_date=past, user=operator)
    crons.cron_fire_due(now=now)
    assert fired == ["* * * * * *"]
    bad.refresh_from_db()
    assert bad.broken_at is not None and "no time after" in bad.last_error
    good.refresh_from_db()
    assert good.broken_at is None and good.next_run_date > past

    fired.clear()
    Cron.objects.filter(id=good.id).update(next_run_date=past)
    crons.cron_fire_due(now=now)
    assert fired == ["* * * * * *"]  # the broken one is skipped, not retried each poll

    client.force_login(operator)
    page = client.get("/crons/").content.decode()
    assert "broken" in page and "no time after" in page and str(bad.id)[:8] in page

    crons.cron_update(cron=bad, schedule="0 3 * * *")
    bad.refresh_from_db()
    assert bad.broken_at is None  # a new schedule mends it


def _terminate_other_backends() -> int:
    """pg_terminate_backend on every other connection to the test database."""
    import psycopg

    with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as killer:
        pids = [pid for (pid,) in killer.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()").fetchall()]
        killer.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid",
                       [pids])
        for _ in range(200):
            row = killer.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)",
                                 [pids]).fetchone()
            if row is not None and row[0] == 0:
                break
            time.sleep(0.01)
    return len(pids)


async def _until(check, message: str) -> None:
    """Poll ``check`` until it is truthy (a hang guard, not a speed test)."""
    for _ in range(160):  # 8 s
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(message)


@pytest.mark.reliability
def test_the_scheduler_lives_on_after_its_connection_is_killed(operator, monkeypatch,
                                                                settings):
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend is PostgreSQL's; this runs in the PostgreSQL pass")
    from asgiref.sync import sync_to_async

    from config import pgpool

    monkeypatch.setattr(pgpool, "needs_check", lambda conn: False)  # draw the dead one
    settings.PLANWATCH = {**settings.PLANWATCH, "CRON_POLL_SECONDS": 0.1}
    fired: list[float] = []
    monkeypatch.setattr(crons, "_start", lambda cron: fired.append(time.monotonic()))
    # no graph of that name: a served daphne of the session polling it starts no runs
    Cron.objects.create(assistant_id="no-such-graph", schedule="* * * * * *",
                        next_run_date=timezone.now(), user=operator)

    async def scenario() -> int:
        poller = asyncio.create_task(crons.apoll_forever())
        try:
            await _until(lambda: fired, "the cron never fired")
            killed = await asyncio.to_thread(_terminate_other_backends)
            kill_time = time.monotonic()
            await _until(lambda: any(t > kill_time + 0.2 for t in fired),
                         "no cron fired after the kill")
            return killed
        finally:
            poller.cancel()
            await sync_to_async(lambda: connection.close())()  # the poller thread's

    killed = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert killed >= 1
    connection.close()  # the test's own connection was killed too


def test_a_user_past_the_cron_cap_is_refused_with_429(client, operator, settings):
    settings.PLANWATCH = {**settings.PLANWATCH, "MAX_CRONS_PER_USER": 2}
    headers = {"x-api-key": api_token(operator)}
    made = [client.post("/langgraph/runs/crons", {"assistant_id": "acquisition",
                                                   "schedule": "0 3 * * *"},
                        content_type="application/json", headers=headers).status_code
            for _ in range(3)]
    assert made == [200, 200, 429]
    refused = client.post("/langgraph/runs/crons", {"assistant_id": "acquisition",
                                                     "schedule": "0 3 * * *"},
                          content_type="application/json", headers=headers)
    assert "PLANWATCH_MAX_CRONS_PER_USER" in refused.content.decode()
    assert Cron.objects.filter(user=operator).count() == 2
