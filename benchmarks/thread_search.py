"""``threads.search`` over 10,000 threads: p50/p99 in ms, with status and metadata filters.

``measure()`` runs in a child process on a SQLite database of its own
(``var/bench/planwatch_bench_threads.sqlite3``, migrated and seeded afresh): 10,000
threads, each with one run in a mix of statuses and metadata of its own, searched through
``/langgraph/threads/search`` as the official SDK sends it (``x-api-key``, JSON), by a user
who sees every thread. ``python -m benchmarks.thread_search`` prints the numbers.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.common import VAR, bench_env, database_url, manage, run_module, summary

THREADS = 10_000
NAME = "planwatch_bench_threads"
STATUSES = ("succeeded", "interrupted", "failed", "running", "cancelled")
QUERIES = {
    "status busy": {"status": "busy", "limit": 10},
    "status interrupted, metadata team": {"status": "interrupted",
                                          "metadata": {"team": "t6"}, "limit": 10},
    "metadata team": {"metadata": {"team": "t3"}, "limit": 10},
    "newest, offset 5,000": {"limit": 10, "offset": 5000},
}


def measure(repeats: int = 50) -> dict[str, Any]:
    """Seed a fresh database and time the searches in a child process."""
    for suffix in ("", "-wal", "-shm"):
        Path(str(VAR / f"{NAME}.sqlite3") + suffix).unlink(missing_ok=True)
    env = bench_env("sqlite", DATABASE_URL=database_url("sqlite", NAME))
    manage("sqlite", "migrate", "--no-input", "-v0", DATABASE_URL=env["DATABASE_URL"])
    result: dict[str, Any] = run_module("benchmarks.thread_search", "--repeats", str(repeats),
                                        env=env)
    return result


def _seed() -> Any:
    from django.contrib.auth.models import Permission, User

    from dashboard.models import Run, Thread
    from dashboard.runs.store import THREAD_STATUS

    user = User.objects.create_user("bench-search", password=uuid.uuid4().hex)
    user.user_permissions.set(Permission.objects.filter(codename="view_all_threads"))
    threads, runs = [], []
    for i in range(THREADS):
        status = STATUSES[i % len(STATUSES)]
        # the thread's status as its run's transitions would have written it
        thread = Thread(id=uuid.uuid4(), graph="acquisition", created_by=user,
                        metadata={"team": f"t{i % 10}", "n": i},
                        status=THREAD_STATUS[Run.Status(status)])
        threads.append(thread)
        run_id = uuid.uuid4()
        runs.append(Run(id=run_id, graph="acquisition", thread_id=f"{run_id}:planner",
                        status=status, conversation=thread,
                        created_by=user))
    Thread.objects.bulk_create(threads, batch_size=1000)
    Run.objects.bulk_create(runs, batch_size=1000)
    return user


def _child(repeats: int) -> dict[str, Any]:
    import django

    django.setup()
    from django.test import Client

    from dashboard.api.auth import create_token

    user = _seed()
    client = Client(headers={"x-api-key": create_token(user)}, HTTP_HOST="127.0.0.1")
    out: dict[str, Any] = {"threads": THREADS}
    for name, query in QUERIES.items():
        times = []
        for _ in range(repeats + 2):
            began = time.perf_counter()
            response = client.post("/langgraph/threads/search", json.dumps(query),
                                   content_type="application/json")
            times.append((time.perf_counter() - began) * 1000)
            assert response.status_code == 200, response.content
            assert response.json(), name  # every query finds threads
        out[name] = summary(times[2:])  # the first two warm the caches
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    print(json.dumps(_child(parser.parse_args().repeats)))
