"""Planwatch's side of the peers benchmark: served, executed and watched as operators do.

``manage.py serve`` (daphne) and ``manage.py planwatch_worker`` (procrastinate) on a
PostgreSQL database of the bench's own with the Redis pub/sub channel layer; the chain of
:mod:`benchmarks.peer_graph` is registered through ``PLANWATCH_GRAPH_MODULES``. Runs are
started through the run service (``run_create``) in a small long-lived Django process and
watched over ``/ws/runs/<id>/?after=0`` with a logged-in operator's session cookie. Until
that consumer is routed (``dashboard/web/routing.py``), the watcher joins the run's channel
group on Redis directly and says so in ``watched_through``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import peer_graph, peers
from benchmarks.common import cpu_seconds

DB_NAME = "planwatch_bench_peers"
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9")
USERNAME = "bench-operator"
TIMEOUT = 30.0
# A seq as the websocket messages may carry it: JSON events or attributes of HTML rows.
SEQ_PATTERNS = (re.compile(r'"seq"\s*:\s*(\d+)'), re.compile(r'data-seq="(\d+)"'))

STARTER = """
import json, os, sys
import django
django.setup()
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from dashboard import services
from dashboard.runs import dispatch
from dashboard.models import Run, RunEvent
user, _ = get_user_model().objects.get_or_create(username=os.environ["BENCH_USER"])
user.set_password(os.environ["BENCH_PASSWORD"])
user.save()
user.user_permissions.set(Permission.objects.filter(content_type__app_label="dashboard"))
print("ready", flush=True)
from planner.registry import get_graph
spec = get_graph(os.environ["BENCH_GRAPH"])
for line in sys.stdin:
    cmd, _, arg = line.strip().partition(" ")
    if cmd == "start":
        run = services.run_create(graph=spec.name, input={}, user=user)
        print(run.id, flush=True)
    elif cmd == "create":  # queued as run_create stores it, started by "dispatch"
        run = Run(graph=spec.name, graph_version=spec.version, input=spec.make_input({}),
                  created_by=user)
        run.thread_id = spec.thread_id(str(run.id))
        run.save()
        print(run.id, flush=True)
    elif cmd == "dispatch":
        dispatch.dispatch(arg, "start")
        print("ok", flush=True)
    elif cmd == "status":
        run = Run.objects.get(id=arg)
        print(json.dumps({"status": run.status, "last_seq": run.last_seq}), flush=True)
    elif cmd == "token":  # an API token for LangGraph's server API (x-api-key)
        from dashboard.api.auth import create_token
        print(create_token(user), flush=True)
    elif cmd == "moments":  # when each run was stored, claimed, and wrote its first node
        from benchmarks.peers_planwatch import run_moments
        print(json.dumps(run_moments(arg.split(","))), flush=True)
    elif cmd == "stamps":
        rows = RunEvent.objects.filter(run_id__in=arg.split(","), kind="node_finished")
        print(json.dumps([[str(e.run_id), e.seq, e.payload["update"]["t"],
                           e.created_at.timestamp()] for e in rows]), flush=True)
"""


def run_moments(run_ids: list[str]) -> dict[str, list[float | None]]:
    """When each run's row was stored, when an executor claimed it, when its first
    ``node_finished`` row was written, and when its first ``node_started`` row was (epoch
    seconds; None for what has not happened)."""
    from django.db.models import Min, Q

    from dashboard.models import Run

    runs = Run.objects.filter(id__in=run_ids).only("id", "created_at", "started_at").annotate(
        first_node=Min("events__created_at", filter=Q(events__kind="node_finished")),
        first_start=Min("events__created_at", filter=Q(events__kind="node_started")))
    return {str(run.id): [moment.timestamp() if moment else None for moment in
                          (run.created_at, run.started_at, run.first_node, run.first_start)]
            for run in runs}


def start_phases(starts: list[peers.Start], moments: dict[str, list[float | None]]
                 ) -> dict[str, float]:
    """p50 (ms) from each run's request until the web process had stored it, a worker had
    claimed it, and its first node's row (the first update a client can be sent) was
    written. The rows are stamped on this machine's clock, as the request is."""
    phases: dict[str, list[float]] = {"run_row": [], "claimed": [], "first_node_row": []}
    for run_id, asked in starts:
        if run_id not in moments:
            continue  # its server named no run (or another server's run)
        for name, moment in zip(phases, moments[run_id][:3], strict=True):
            if moment is not None:
                phases[name].append((moment - asked) * 1000)
    return {f"start_{name}_p50_ms": round(peers.percentile(values, 50), 2)
            for name, values in phases.items()}


class Starter:
    """A Django process that starts runs through the run service and reads them back."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", STARTER], cwd=peers.ROOT, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )
        self.lock = threading.Lock()
        if self._read() != "ready":
            raise RuntimeError("the run starter did not start; see the output above")

    def _read(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line:
            raise RuntimeError(f"the run starter exited with {self.proc.wait()}")
        return line

    def ask(self, command: str) -> str:
        """Send one command line and return the answer line."""
        assert self.proc.stdin is not None
        with self.lock:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
            return self._read()

    async def aask(self, command: str) -> str:
        """``ask`` without blocking the event loop."""
        return await asyncio.to_thread(self.ask, command)

    def close(self) -> None:
        """End the process."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@dataclass
class Watched:
    """What the watcher saw of one run: when it connected and what arrived when."""

    run_id: str
    opened_at: float
    received: list[tuple[float, list[int]]] = field(default_factory=list)
    lost: bool = False  # its last event never arrived (within TIMEOUT)


@dataclass
class PlanwatchBench:
    """A served Planwatch with a run starter, a logged-in session and a watcher."""

    base_url: str
    starter: Starter
    cookie: str
    websocket: bool
    last_seq: int = 0
    api_key: str = ""
    """A token for LangGraph's server API under ``/langgraph`` (the peers' own client)."""
    pids: dict[str, int] = field(default_factory=dict)
    """The worker's and daphne's process ids (their CPU is read around a phase)."""

    def cpu(self) -> dict[str, float]:
        """CPU seconds used so far by the worker, daphne, and the PostgreSQL backends
        serving the bench's database (a backend that exits takes its share with it)."""
        used = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        used["postgres"] = sum(cpu_seconds(pid) for pid in _backends(DB_NAME))
        return used

    def start_phases(self, starts: list[peers.Start]) -> dict[str, float]:
        """Where runs spent the time from their request to their first update (see
        :func:`start_phases`), from the runs' own records."""
        ids = [run_id for run_id, _ in starts if run_id]
        return start_phases(starts, json.loads(self.starter.ask("moments " + ",".join(ids))))

    @property
    def watched_through(self) -> str:
        """How runs are watched (the websocket, or the Redis group until it is routed)."""
        return "websocket /ws/runs/<id>/" if self.websocket else "redis channel group"

    async def arun(self) -> Watched:
        """Start one run and watch it until its last event has arrived.

        The run is stored queued, the watcher connects, and only then is the run
        dispatched: like the peers' ``runs.stream``, which starts a run and streams it from
        its first node, the figure is about live events, not about joining a run late.
        """
        if not self.websocket:
            run_id = await self.starter.aask("start")
            try:
                return await self._awatch_group(run_id)
            except TimeoutError:
                return Watched(run_id, time.time(), lost=True)
        run_id = await self.starter.aask("create")
        try:
            return await self._awatch_websocket(run_id)
        except TimeoutError:  # counted and reported, not fatal: the other runs still count
            return Watched(run_id, time.time(), lost=True)

    async def _awatch_websocket(self, run_id: str) -> Watched:
        from websockets.asyncio.client import connect

        url = self.base_url.replace("http", "ws", 1) + f"/ws/runs/{run_id}/?after=0"
        async with connect(url, origin=self.base_url,  # type: ignore[arg-type]
                           additional_headers={"Cookie": f"sessionid={self.cookie}"}) as ws:
            watched = Watched(run_id, time.time())
            await self.starter.aask(f"dispatch {run_id}")
            top = 0
            while top < self.last_seq:
                message = await asyncio.wait_for(ws.recv(), TIMEOUT)
                now = time.time()
                text = message if isinstance(message, str) else message.decode()
                seqs = [int(s) for pattern in SEQ_PATTERNS for s in pattern.findall(text)]
                watched.received.append((now, seqs))
                top = max([top, *seqs])
        return watched

    async def _awatch_group(self, run_id: str) -> Watched:
        layer = _layer()
        channel = await layer.new_channel()
        group = f"run.{run_id}"
        await layer.group_add(group, channel)
        watched = Watched(run_id, time.time())
        try:
            while True:
                message = await asyncio.wait_for(layer.receive(channel), TIMEOUT)
                now = time.time()
                seqs = list(range(message["first"], message["last"] + 1)) \
                    if message.get("type") == "run.events" else []
                watched.received.append((now, seqs))
                if seqs and seqs[-1] >= self.last_seq:
                    return watched
        finally:
            await layer.group_discard(group, channel)

    async def aresolve(self, results: list[Watched]) -> peers.Resolved:
        """Node latencies of watched runs (nodes done before the watcher connected: left out).

        The break-down splits each latency at the moment the executor stamped the event
        row (``created_at``, just before its INSERT): node → row, then row → client.
        """
        stamps: dict[tuple[str, int], tuple[float, float]] = {}
        for chunk in range(0, len(results), 20):
            ids = ",".join(w.run_id for w in results[chunk:chunk + 20])
            for run_id, seq, t, row in json.loads(await self.starter.aask(f"stamps {ids}")):
                stamps[run_id, seq] = (t, row)
        latencies, to_row, to_client = [], [], []
        for w in results:
            for received, seqs in w.received:
                for seq in seqs:
                    t, row = stamps.pop((w.run_id, seq), (0.0, 0.0))
                    if t >= w.opened_at:
                        latencies.append((received - t) * 1000)
                        to_row.append((row - t) * 1000)
                        to_client.append((received - row) * 1000)
        return latencies, {
            "node_to_row_p50_ms": round(peers.percentile(to_row, 50), 2),
            "node_to_row_p99_ms": round(peers.percentile(to_row, 99), 2),
            "row_to_client_p50_ms": round(peers.percentile(to_client, 50), 2),
            "row_to_client_p99_ms": round(peers.percentile(to_client, 99), 2),
            "lost_runs": sum(w.lost for w in results),
        }

    def calibrate(self) -> None:
        """Run the chain once to learn its last seq (the same for every run of it)."""
        run_id = self.starter.ask("start")
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            state = json.loads(self.starter.ask(f"status {run_id}"))
            if state["status"] == "succeeded":
                self.last_seq = state["last_seq"]
                return
            if state["status"] in ("failed", "cancelled"):
                break
            time.sleep(0.1)
        raise RuntimeError(f"calibration run {run_id} did not succeed: {state}; see "
                           f"{peers.VAR}/planwatch-worker.log")


_layers: dict[int, Any] = {}


def _layer() -> Any:
    """One Redis pub/sub channel layer per event loop (as the servers configure it)."""
    from channels_redis.pubsub import RedisPubSubChannelLayer

    key = id(asyncio.get_running_loop())
    if key not in _layers:
        _layers[key] = RedisPubSubChannelLayer(hosts=[REDIS_URL])
    return _layers[key]


def _backends(database: str) -> list[int]:
    """The PostgreSQL server processes serving ``database`` (found by their title)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                title = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if title.startswith("postgres:") and f" {database} " in title:
                found.append(int(entry.name))
    return found


def websocket_routed() -> bool:
    """Whether ``/ws/runs/<id>/`` is routed (``BENCH_PLANWATCH_WATCH=group`` bypasses it)."""
    if os.environ.get("BENCH_PLANWATCH_WATCH") == "group":
        return False
    return "ws/runs/<" in (peers.ROOT / "dashboard" / "web" / "routing.py").read_text()


def env() -> dict[str, str]:
    """Environment of every Planwatch process of the benchmark."""
    return {
        **os.environ,
        "DATABASE_URL": f"{peers.PG_SERVER}/{DB_NAME}",
        "REDIS_URL": REDIS_URL,
        "PLANWATCH_EXECUTOR": "procrastinate",
        "PLANWATCH_GRAPH_MODULES": "benchmarks.peer_graph",
        "PLANWATCH_VAR_DIR": str(peers.VAR / "planwatch"),
        "PLANWATCH_THINK_TIME": "0",
        "PLANWATCH_MAX_CONCURRENT_RUNS": "16",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "LOG_LEVEL": "WARNING",
        "PROCRASTINATE_LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
        "BENCH_USER": USERNAME,
        "BENCH_PASSWORD": "bench-" + os.urandom(8).hex(),
        "BENCH_GRAPH": peer_graph.NAME,
        # the same chain, as the peers load it: through a langgraph.json (as "chain80")
        "PLANWATCH_LANGGRAPH_CONFIG": str(peers.CONFIG_DIR / "langgraph.json"),
    }


def login(base_url: str, username: str, password: str) -> str:
    """Log in through /accounts/login/ and return the session cookie."""
    import requests

    session = requests.Session()
    session.get(f"{base_url}/accounts/login/", timeout=10).raise_for_status()
    reply = session.post(
        f"{base_url}/accounts/login/", timeout=10, allow_redirects=False,
        data={"username": username, "password": password,
              "csrfmiddlewaretoken": session.cookies["csrftoken"]},
        headers={"Referer": f"{base_url}/accounts/login/"},
    )
    if "sessionid" not in session.cookies:
        raise RuntimeError(f"logging in as {username!r} failed ({reply.status_code})")
    return session.cookies["sessionid"]


@contextmanager
def planwatch_server() -> Iterator[PlanwatchBench]:
    """Planwatch on a fresh database: daphne, one worker and a run starter."""
    environ = env()
    peers.recreate_database(DB_NAME)
    migrated = subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v0"],
                              cwd=peers.ROOT, env=environ, capture_output=True, text=True)
    if migrated.returncode:
        raise RuntimeError(f"migrate failed:\n{migrated.stderr[-3000:]}")
    port = peers.free_port()
    base_url = f"http://127.0.0.1:{port}"
    with ExitStack() as stack:
        web = stack.enter_context(peers.process(
            [sys.executable, "manage.py", "serve", "--port", str(port)], env=environ,
            log="peers/planwatch-daphne.log", ready=peers.http_ok(f"{base_url}/accounts/login/"),
        ))
        worker = stack.enter_context(peers.process(
            [sys.executable, "manage.py", "planwatch_worker"], env=environ,
            log="peers/planwatch-worker.log",
        ))
        starter = Starter(environ)
        stack.callback(starter.close)
        bench = PlanwatchBench(
            base_url, starter, login(base_url, USERNAME, environ["BENCH_PASSWORD"]),
            websocket=websocket_routed(),
        )
        bench.pids = {"worker": worker.pid, "daphne": web.pid}
        bench.calibrate()
        bench.api_key = starter.ask("token")
        yield bench
