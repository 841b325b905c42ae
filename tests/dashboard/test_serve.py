"""``manage.py serve --processes N``: N daphnes on one socket, a dead one restarted, a
SIGTERM stops them all; SQLite is served from one process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ARTIFACTS, ROOT, SMALL_POOLS, database_url, free_port

pytestmark = [pytest.mark.long, pytest.mark.slow, pytest.mark.pg]


def get(url: str) -> tuple[int, str]:
    """A GET's status and body (errors included); (0, "") while nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def web_pids(base: str) -> set[str]:
    """The web processes ``/metrics`` lists (each one's executor slots, by pid)."""
    status, text = get(f"{base}/metrics")
    if status != 200:
        return set()
    return {sample.labels["pid"] for family in text_string_to_metric_families(text)
            if family.name == "planwatch_process_executor_slots"
            for sample in family.samples if "pid" in sample.labels}


def wait_for(what: str, check, timeout: float = 90):
    """Poll ``check()`` until it is truthy (a deadlock guard, not a speed test)."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.2)
    return found


@pytest.mark.django_db(transaction=True)
def test_two_processes_answer_on_one_port_and_a_killed_one_is_restarted(tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("--processes N needs PostgreSQL: this runs in make test's PostgreSQL pass")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = (ARTIFACTS / f"serve-processes-{port}.log").open("w")
    env = {**os.environ, **SMALL_POOLS, "DATABASE_URL": database_url(connection.settings_dict),
           "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    supervisor = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--processes", "2",
         "--stop-timeout", "15"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        # a loaded machine took 30 s to start two
        assert wait_for("/readyz", lambda: get(f"{base}/readyz")[0] == 200, timeout=120)
        def two(without: str = "") -> set[str] | None:
            pids = web_pids(base)
            return pids if len(pids) == 2 and without not in pids else None

        first = wait_for("two web processes", two)
        victim = sorted(first)[0]
        os.kill(int(victim), signal.SIGKILL)
        now = wait_for("a replacement", lambda: two(without=victim))
        assert len(now & first) == 1  # the other one served on throughout
        assert get(f"{base}/healthz")[0] == 200
    finally:
        supervisor.send_signal(signal.SIGTERM)
        try:
            code = supervisor.wait(30)
        finally:
            if supervisor.poll() is None:
                supervisor.kill()
            log.close()
    assert code == 0
    assert get(f"{base}/healthz")[0] == 0  # nothing listens any more
    text = (ARTIFACTS / f"serve-processes-{port}.log").read_text()
    assert f"(pid {victim}) exited with -9" in text and "Planwatch ready" in text


def test_sqlite_is_served_from_one_process(settings):
    settings.IS_POSTGRES = False
    with pytest.raises(CommandError, match="--processes 2 needs PostgreSQL"):
        call_command("serve", "--processes", "2")
