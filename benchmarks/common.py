"""What every benchmark shares: statistics, the machine, bench databases and servers.

Benchmarks run against real components only: a PostgreSQL database of their own
(``planwatch_bench`` on the same server as the tests), an SQLite file under
``var/bench/``, Redis, daphne subprocesses and procrastinate workers.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var" / "bench"
PG_SERVER = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0 to 100) by linear interpolation; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summary(values: Sequence[float]) -> dict[str, float]:
    """n, p50, p90, p99, max and the interquartile spread of ``values``."""
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": max(values) if values else float("nan"),
        "iqr": percentile(values, 75) - percentile(values, 25),
    }


def machine() -> dict[str, Any]:
    """Cores, memory, OS and the versions the results depend on."""
    from importlib.metadata import version

    mem_kb = 0
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    cpu = ""
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    pg = subprocess.run(
        ["psql", f"{PG_SERVER}/postgres", "-Atc", "show server_version"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()
    redis = ""
    try:
        import redis as redis_lib

        redis = redis_lib.Redis.from_url(REDIS_URL).info()["redis_version"]
    except Exception as exc:  # reported, not fatal: the figures needing Redis will say so
        redis = f"unavailable ({exc})"
    return {
        "host": socket.gethostname(), "cpu": cpu, "cores": os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "os": platform.platform(), "python": platform.python_version(),
        "postgresql": pg or "unavailable", "redis": redis,
        **{pkg: version(pkg) for pkg in (
            "django", "channels", "channels-redis", "daphne", "langgraph",
            "langgraph-checkpoint-postgres", "langgraph-checkpoint-sqlite", "procrastinate",
        )},
    }


def database_url(db: str, name: str = "planwatch_bench") -> str:
    """The bench database URL for ``db`` ("pg" or "sqlite")."""
    if db == "pg":
        return f"{PG_SERVER}/{name}"
    VAR.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{VAR / (name + '.sqlite3')}"


def bench_env(db: str, **extra: str) -> dict[str, str]:
    """Environment for a bench subprocess on ``db``: its own var dir, no think-time."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(db),
        "PLANWATCH_VAR_DIR": str(VAR / "var"),
        "PLANWATCH_THINK_TIME": "0",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "LOG_LEVEL": "WARNING",
        "PROCRASTINATE_LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("REDIS_URL", None)
    env.update(extra)
    return env


def measure_on_fresh_sqlite(module: str, db_name: str, repeats: int,
                            **extra: str) -> subprocess.CompletedProcess[str]:
    """``python -m <module> --measure --repeats N`` on a new, migrated SQLite database of
    its own (``db_name``), with ``extra`` in its environment; what it printed."""
    env = bench_env("sqlite", DATABASE_URL=database_url("sqlite", db_name), **extra)
    path = database_url("sqlite", db_name).removeprefix("sqlite:///")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
    subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v0"], cwd=ROOT,
                   env=env, check=True)
    done = subprocess.run([sys.executable, "-m", module, "--measure", "--repeats",
                           str(repeats)], cwd=ROOT, env=env, check=False,
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the measure failed:\n{done.stderr[-3000:]}")
    return done


def reset_database(db: str) -> None:
    """Drop and re-create the bench database, then migrate it."""
    if db == "pg":
        for sql in ("DROP DATABASE IF EXISTS planwatch_bench WITH (FORCE)",
                    "CREATE DATABASE planwatch_bench"):
            subprocess.run(["psql", f"{PG_SERVER}/postgres", "-qc", sql], check=True,
                           capture_output=True)
    else:
        for suffix in ("", "-wal", "-shm"):
            Path(str(VAR / "planwatch_bench.sqlite3") + suffix).unlink(missing_ok=True)
    manage(db, "migrate", "--no-input", "-v0")


def manage(db: str, *args: str, **env: str) -> str:
    """Run ``manage.py`` with the bench environment; return its stdout."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=bench_env(db, **env),
        capture_output=True, text=True, check=False,
    )
    if done.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def run_module(module: str, *args: str, env: dict[str, str], timeout: float = 900) -> Any:
    """Run ``python -m module`` in a subprocess and parse the JSON it prints last."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=timeout, check=False,
    )
    if done.returncode:
        raise RuntimeError(f"{module} {' '.join(args)} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def process(args: list[str], *, env: dict[str, str], log: str, port: int | None = None,
            ready: Callable[[], bool] | None = None, cwd: Path = ROOT, timeout: float = 90,
            ) -> Iterator[subprocess.Popen[bytes]]:
    """A server subprocess for a ``with`` block, its output logged under var/bench.

    It is ready once ``port`` accepts connections, or ``ready()`` says so.
    """
    if port is not None:
        ready = partial(port_open, port)
    path = VAR / log
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout
            while ready is not None and not ready():
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = path.read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"{args[0]} did not come up; {path} ends:\n{tail}")
                time.sleep(0.1)
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def port_open(port: int) -> bool:
    """Whether something listens on loopback ``port``."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def rss_mib(pid: int) -> float:
    """Resident memory of a process (and its threads) in MiB."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) a process has used so far, in seconds."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
