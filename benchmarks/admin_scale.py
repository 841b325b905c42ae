"""The admin's checkpoint pages with 1,000,000 checkpoint rows in PostgreSQL: p50/p99 in ms.

``measure()`` runs the work in a child process on a database of its own
(``planwatch_bench_admin``, created, migrated and seeded on first use, reused after), so it
never touches the database of the process calling it. Seeded rows are generated in SQL
(``generate_series``): 20,000 threads, a fifth of the rows in subgraph namespaces, mixed
sources, one write per checkpoint; a real acquisition run adds real checkpoints, whose
detail page is the one timed. ``python -m benchmarks.admin_scale`` prints the numbers.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import percentile

ROOT = Path(__file__).resolve().parent.parent
PG_SERVER = os.environ.get("PLANWATCH_BENCH_PG", "postgres://postgres@127.0.0.1:5432")
DB_NAME = "planwatch_bench_admin"
THREADS = 20_000

# Ids are uuid6 strings built from a 60-bit tick count, so they sort by time as LangGraph's do.
SEED_CHECKPOINTS = """
WITH s AS (
  SELECT i, (i - 1) %% %(threads)s AS t, (i - 1) / %(threads)s AS k,
         lpad(to_hex(%(base)s::bigint + i::bigint * 100000), 15, '0') AS hx,
         lpad(to_hex(%(base)s::bigint + (i - %(threads)s)::bigint * 100000), 15, '0') AS phx
  FROM generate_series(%(start)s, %(stop)s) AS i
)
INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,
                         checkpoint, metadata)
SELECT md5('thread' || t) || ':planner',
       CASE WHEN t %% 5 = 0 THEN 'sub:' || md5('ns' || t) ELSE '' END,
       substr(hx, 1, 8) || '-' || substr(hx, 9, 4) || '-6' || substr(hx, 13, 3) || '-8'
         || lpad(to_hex(i %% 4096), 3, '0') || '-' || lpad(to_hex(i), 12, '0'),
       CASE WHEN k = 0 THEN NULL ELSE
         substr(phx, 1, 8) || '-' || substr(phx, 9, 4) || '-6' || substr(phx, 13, 3) || '-8'
         || lpad(to_hex((i - %(threads)s) %% 4096), 3, '0') || '-'
         || lpad(to_hex(i - %(threads)s), 12, '0') END,
       NULL,
       jsonb_build_object('v', 4, 'id', 'seed', 'ts', '2026-11-01T00:00:00+00:00',
                          'channel_values', jsonb_build_object('n', k, 'goal', 'bench'),
                          'channel_versions', '{}'::jsonb, 'versions_seen', '{}'::jsonb),
       jsonb_build_object('source', CASE WHEN k = 0 THEN 'input'
                                         WHEN i %% 997 = 0 THEN 'update' ELSE 'loop' END,
                          'step', k - 1, 'parents', '{}'::jsonb)
FROM s
"""
SEED_WRITES = """
INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,
                               type, blob, task_path)
SELECT thread_id, checkpoint_ns, checkpoint_id, md5(checkpoint_id), 0, 'n', 'null', '',
       '~__pregel_pull, '
         || (ARRAY['tick', 'select', 'decide', 'search'])[1 + ascii(md5(checkpoint_id)) %% 4]
FROM checkpoints
"""


def _ensure_database() -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DB_NAME]).fetchone():
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')


def _seed(rows: int) -> float:
    """Seed ``rows`` checkpoint rows unless they are there already; seconds spent."""
    from django.db import connection

    from dashboard.models import Run

    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM checkpoints WHERE thread_id NOT LIKE '%-%'")
        have = cur.fetchone()[0]
        if have >= rows:
            return 0.0
        started = time.perf_counter()
        cur.execute("TRUNCATE checkpoints, checkpoint_writes, checkpoint_blobs")
        Run.objects.all().delete()  # their checkpoints went with the truncate
        base = 0x1F1E0000000000 - rows * 100_000
        for start in range(1, rows + 1, 200_000):
            stop = min(start + 199_999, rows)
            cur.execute(SEED_CHECKPOINTS, {"threads": THREADS, "base": base, "start": start,
                                           "stop": stop})
        cur.execute(SEED_WRITES, {})
        cur.execute("ANALYZE checkpoints")
        cur.execute("ANALYZE checkpoint_writes")
        return time.perf_counter() - started


def _real_run() -> str:
    """A finished (or interrupted) acquisition run's thread, run once through the service."""
    from django.contrib.auth import get_user_model

    from dashboard import services
    from dashboard.models import Run

    moving = (Run.Status.QUEUED, Run.Status.RUNNING)
    run = Run.objects.filter(graph="acquisition").exclude(status__in=moving).first()
    if run is None:
        user = get_user_model().objects.get(username="bench")
        run = services.run_create(graph="acquisition", input={}, user=user)
        deadline = time.monotonic() + 120
        while run.status in moving and time.monotonic() < deadline:
            time.sleep(0.2)
            run.refresh_from_db()
    return run.thread_id


def _timed(client: Any, url: str, repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats + 1):
        started = time.perf_counter()
        response = client.get(url)
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200:
            raise RuntimeError(f"GET {url} answered {response.status_code}")
        samples.append(elapsed)
    return samples[1:]  # the first request warms caches and imports


def _work(rows: int, repeats: int) -> dict[str, float]:
    """Seed, then time the pages (in this process, configured for the bench database)."""
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.urls import reverse

    from dashboard.models import Checkpoint

    call_command("migrate", verbosity=0)
    user_model = get_user_model()
    user = (user_model.objects.filter(username="bench").first()
            or user_model.objects.create_superuser(username="bench", password=None))
    seed_s = _seed(rows)
    thread = _real_run()
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    client = Client()
    client.force_login(user)
    changelist = reverse("admin:dashboard_checkpoint_changelist")
    real = Checkpoint.objects.filter(thread_id=thread).exclude(parent_checkpoint_id=None)
    detail = reverse("admin:dashboard_checkpoint_change", args=[real.first().pk])
    other = Checkpoint.objects.exclude(thread_id=thread).first()
    pages = {
        "list": changelist,
        "filtered": f"{changelist}?source=update&ns=root",
        "search": f"{changelist}?q={other.thread_id}",
        "detail": detail,
    }
    result: dict[str, float] = {"rows": float(Checkpoint.objects.order_by()[:rows].count()),
                                "seed_s": round(seed_s, 1)}
    for name, url in pages.items():
        samples = _timed(client, url, repeats)
        result[f"{name}_p50_ms"] = round(statistics.median(samples), 1)
        result[f"{name}_p99_ms"] = round(percentile(samples, 99), 1)
    return result


def measure(*, rows: int = 1_000_000, repeats: int = 30) -> dict[str, float]:
    """Time the admin's checkpoint list (plain, filtered, searched) and a detail page."""
    _ensure_database()
    env = {**os.environ, "DATABASE_URL": f"{PG_SERVER}/{DB_NAME}",
           "DJANGO_SETTINGS_MODULE": "config.settings", "PLANWATCH_THINK_TIME": "0",
           "PLANWATCH_VAR_DIR": str(ROOT / "var" / "bench_admin")}
    env.pop("REDIS_URL", None)
    out = subprocess.run(
        [sys.executable, "-c", "import json, sys; from benchmarks.admin_scale import _work; "
         f"print(json.dumps(_work({int(rows)}, {int(repeats)})))"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"admin benchmark failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(measure(), indent=2))
