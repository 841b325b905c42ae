"""Event latency, fan-out and memory on the scale-out stack, against a bare path.

``python -m benchmarks.stream`` (bench environment on PostgreSQL with ``REDIS_URL``)
starts ``manage.py serve`` (daphne), ``manage.py planwatch_worker`` (procrastinate, which
executes the runs) and a second daphne serving :mod:`benchmarks.bare_asgi`, then:

- latency: N runs (1, 20, 100) each watched by one websocket client on
  ``/ws/runs/<id>/?after=0``, their starts spread over one model call; for every event,
  the client's receipt time minus the moment its write committed (the writer puts it in
  the doorbell; a listener on Redis reads it there and notes when the doorbell arrived,
  which splits the figure into commit → Redis and Redis → client). Also reported: from
  the row's ``created_at`` (stamped before its INSERT) and the write itself;
- the same with every run started at once (the scripted model keeps them in step);
- bare: as many groups, fed by this process through the same Redis layer to the bare
  consumer at the moments the runs' own writes committed: producer → Redis → daphne →
  client;
- fan-out: one run watched by 100 clients, and the bare path's one group with 100 clients
  fed frames of the same mean size at the run's moments; with ``--wide-fanout N``, one
  run watched by N clients dealt out over ``--web-processes`` daphnes (4);
- browser: the trace view in Debian's Chromium (Playwright); for every timeline row, the
  moment it entered the DOM (a MutationObserver) minus the moment its write committed;
- memory: the worker's and the web server's RSS, idle and at the peak of 100 runs in
  flight (each watched).

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import django
import requests

from benchmarks import inflight
from benchmarks.common import free_port, process, summary

GRAPH = "decomposition"
INPUT = {"breadth": 2, "goal": "Write a short market report"}
SEQ = re.compile(r'data-seq="(\d+)"')
USER, PASSWORD = "bench-stream", "bench-stream-pw-1234"


def main() -> None:
    """Start the stack, measure, print JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", default="1,20,100")
    parser.add_argument("--fanout", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--at-once", default="20",
                        help="run counts measured again with every run started at once")
    parser.add_argument("--browser-runs", type=int, default=8)
    parser.add_argument("--wide-fanout", type=int, default=0,
                        help="clients of one run dealt out over --web-processes daphnes")
    parser.add_argument("--web-processes", type=int, default=4)
    parser.add_argument("--workers", type=int, default=1,
                        help="procrastinate worker processes (the memory figure is per worker)")
    args = parser.parse_args()
    # runs are dispatched from here to the workers' queue: with the default in-process
    # executor they would run in this process, beside the clients that time them
    os.environ["PLANWATCH_EXECUTOR"] = "procrastinate"
    django.setup()
    _operator()
    web, bare = free_port(), free_port()
    env = {**os.environ, "ALLOWED_HOSTS": "127.0.0.1,localhost",
           "PLANWATCH_MAX_CONCURRENT_RUNS": "100"}
    py = sys.executable
    with (
        process([py, "manage.py", "serve", "--port", str(web)], env=env, log="web.log",
                port=web) as web_proc,
        process([py, "-m", "daphne", "-b", "127.0.0.1", "-p", str(bare),
                 "benchmarks.bare_asgi:application"], env=env, log="bare.log", port=bare),
        contextlib.ExitStack() as stack,
    ):
        workers = [stack.enter_context(process([py, "manage.py", "planwatch_worker"], env=env,
                                                log=f"worker{i}.log"))
                   for i in range(args.workers)]
        worker = workers[0]
        cookie = _login(f"http://127.0.0.1:{web}")
        watch = Watcher(web, cookie)
        asyncio.run(watch.runs(1, 1))  # warm up: imports, compiled graph, pools
        _check_executed_by(workers)
        out: dict[str, Any] = {"graph": GRAPH, "input": INPUT, "workers": args.workers}
        # each process with the ones it forked (`serve --processes N` answers from its children)
        idle = {"worker": inflight.rss(worker.pid), "web": inflight.rss(web_proc.pid)}
        sizes = [int(x) for x in args.runs.split(",")]
        for n in sizes:
            figure, bare_lat = Pass(), []
            peak = {"worker": 0.0, "web": 0.0}
            cpu = {"worker": 0.0, "web": 0.0}
            for _ in range(args.repeats):
                before = {"worker": inflight.cpu(worker.pid), "web": inflight.cpu(web_proc.pid)}
                with Sampler({"worker": worker.pid, "web": web_proc.pid}) as sampler:
                    got = asyncio.run(watch.runs(n, 1))
                cpu["worker"] += inflight.cpu(worker.pid) - before["worker"]
                cpu["web"] += inflight.cpu(web_proc.pid) - before["web"]
                for key in peak:
                    peak[key] = max(peak[key], sampler.peak[key])
                figure.extend(got)
                bare_lat += asyncio.run(_bare(bare, got.schedule, size=watch.frame_bytes()))
            out[f"latency_{n}"] = {**figure.report(), "cpu_ms_per_run": {
                side: seconds / (n * args.repeats) * 1000 for side, seconds in cpu.items()}}
            out[f"bare_{n}"] = summary(bare_lat)
            if n == max(sizes):
                out["memory"] = {
                    "runs_in_flight": n, "idle_mib": idle, "peak_mib": peak,
                    "worker_per_run_mib": (peak["worker"] - idle["worker"]) / n,
                    "web_per_watched_run_mib": (peak["web"] - idle["web"]) / n,
                }
        for n in (int(x) for x in args.at_once.split(",") if x):
            figure, bare_lat = Pass(), []
            for _ in range(args.repeats):
                got = asyncio.run(watch.runs(n, 1, stagger=False))
                figure.extend(got)
                bare_lat += asyncio.run(_bare(bare, got.schedule, size=watch.frame_bytes()))
            out[f"at_once_{n}"] = {**figure.report(), "bare": summary(bare_lat)}
        fan, bare_fan = Pass(), []
        for _ in range(args.repeats if args.fanout else 0):
            got = asyncio.run(watch.runs(1, args.fanout))
            fan.extend(got)
            bare_fan += asyncio.run(_bare(bare, got.schedule, clients=args.fanout,
                                          size=watch.frame_bytes()))
        if fan.received:
            out["fanout"] = {"clients": args.fanout, "frame_bytes": watch.frame_bytes(),
                             **fan.report(), "bare": summary(bare_fan)}
        if args.browser_runs:
            out["browser"] = _browser(web, cookie, args.browser_runs)
        if args.wide_fanout:  # last: its daphnes and clients load the machine
            out["fanout_wide"] = _wide_fanout(env, web, cookie, clients=args.wide_fanout,
                                              processes=args.web_processes, bare=bare)
    print(json.dumps(out))


def _wide_fanout(env: dict[str, str], web: int, cookie: str, *, clients: int,
                 processes: int, bare: int) -> dict[str, Any]:
    """One run watched by ``clients`` clients dealt out over ``processes`` daphnes (the
    running one and more started here, as the scale-out deployment adds them behind its
    proxy); every daphne hears the run's doorbells on Redis and renders them once. Its
    bare twin: as many clients over as many bare daphnes, one group fed frames of the same
    size at the run's moments (what the machine gives with no Planwatch in the path)."""
    py = sys.executable
    with contextlib.ExitStack() as stack:
        more, more_bare = [], []
        for _ in range(processes - 1):
            port, bare_port = free_port(), free_port()
            stack.enter_context(process([py, "manage.py", "serve", "--port", str(port)],
                                        env=env, log=f"web-{port}.log", port=port))
            stack.enter_context(process([py, "-m", "daphne", "-b", "127.0.0.1", "-p",
                                         str(bare_port), "benchmarks.bare_asgi:application"],
                                        env=env, log=f"bare-{bare_port}.log", port=bare_port))
            more.append(port)
            more_bare.append(bare_port)
        watch = Watcher(web, cookie, more_ports=tuple(more))
        try:
            asyncio.run(watch.runs(1, processes))  # warm up every daphne
            got = asyncio.run(watch.runs(1, clients))
        except Exception as exc:  # reported in its row; the other figures still count
            return {"clients": clients, "web_processes": processes,
                    "error": f"{type(exc).__name__}: {exc}"}
        row: dict[str, Any] = {"clients": clients, "web_processes": processes,
                               **got.report()}
        try:
            row["bare"] = summary(asyncio.run(_bare(
                (bare, *more_bare), got.schedule, clients=clients, size=watch.frame_bytes())))
        except Exception as exc:
            row["bare"] = {"error": f"{type(exc).__name__}: {exc}"}
    return row


def _check_executed_by(workers: list[Any]) -> None:
    """Fail unless the last run was executed by one of the worker processes."""
    from dashboard.models import RunEvent

    started = RunEvent.objects.filter(kind=RunEvent.Kind.RUN_STARTED).latest("created_at")
    pid = int(started.payload["owner"].split(":")[1])
    if pid not in {w.pid for w in workers}:
        raise RuntimeError(f"the run was executed by process {pid}, not by a worker")


def _operator() -> None:
    """The operator whose sockets watch the runs: on the team (the runs are made as the
    engine makes them, with no creator, and only their owner or the team may watch a run:
    dashboard/policy.py; without it every socket was refused, 403 at the handshake)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    from dashboard.policy import TEAM_PERMISSION

    user, _ = get_user_model().objects.get_or_create(username=USER)
    user.set_password(PASSWORD)
    user.save()
    app_label, codename = TEAM_PERMISSION.split(".")
    user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label,
                                                     codename=codename))


def _login(base: str) -> str:
    s = requests.Session()
    s.get(f"{base}/accounts/login/", timeout=10)
    r = s.post(f"{base}/accounts/login/", timeout=10, data={
        "username": USER, "password": PASSWORD,
        "csrfmiddlewaretoken": s.cookies["csrftoken"],
    }, headers={"Referer": f"{base}/accounts/login/"})
    r.raise_for_status()
    return f"sessionid={s.cookies['sessionid']}"


class Sampler:
    """Samples the RSS of some processes every 50 ms; keeps the peak."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.peak = dict.fromkeys(pids, 0.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            for name, pid in self.pids.items():
                self.peak[name] = max(self.peak[name], inflight.rss(pid))


@dataclass
class Pass:
    """What one pass of runs showed: latencies in ms, and when each run's doorbells rang."""

    received: list[float] = field(default_factory=list)  # committed → received
    from_stamp: list[float] = field(default_factory=list)  # row stamped → received
    write: list[float] = field(default_factory=list)  # row stamped → committed (the INSERT)
    to_redis: list[float] = field(default_factory=list)  # committed → heard on Redis
    from_redis: list[float] = field(default_factory=list)  # heard on Redis → received
    schedule: list[list[float]] = field(default_factory=list)  # per run, from the first commit

    def extend(self, other: Pass) -> None:
        """Add another pass's latencies (the schedule stays this pass's)."""
        for name in ("received", "from_stamp", "write", "to_redis", "from_redis"):
            getattr(self, name).extend(getattr(other, name))

    def report(self) -> dict[str, Any]:
        """The figure (committed → received) and its parts, summarised."""
        return {**summary(self.received), "from_stamp": summary(self.from_stamp),
                "split": {"write": summary(self.write), "to_redis": summary(self.to_redis),
                          "from_redis": summary(self.from_redis)}}


class Watcher:
    """Starts runs and watches them over the trace websocket like the trace view does."""

    def __init__(self, port: int, cookie: str, *, more_ports: tuple[int, ...] = ()) -> None:
        self.ports = (port, *more_ports)  # the clients of a run are dealt out over these
        self.cookie = cookie
        self.frames = [0, 0]  # frames received, their bytes: the mean feeds the bare path

    def frame_bytes(self) -> int:
        """The mean size of the frames received so far."""
        return self.frames[1] // max(1, self.frames[0])

    async def runs(self, n: int, clients_per_run: int, *, stagger: bool = True) -> Pass:
        """Start ``n`` runs, each watched by ``clients_per_run`` clients.

        With ``stagger``, the starts are spread evenly over one model call (the think
        time), as runs that operators start do not all call their model at the same
        instant; without it every run starts at once and the scripted model, which thinks
        exactly as long each time, keeps them in step: bursts of ``n`` writes together.
        """
        from asgiref.sync import sync_to_async
        from django.conf import settings

        from dashboard.models import Run, RunEvent
        from dashboard.runs.dispatch import dispatch

        ids = await sync_to_async(_queued_runs)(n)
        # at most 50 handshakes at a time: a daphne's listen backlog is Twisted's 50, and
        # a thousand clients connecting at once are refused past it
        gate = asyncio.Semaphore(50)
        received: list[dict[int, float]] = []
        ready: list[asyncio.Event] = []
        tasks = []
        for run_id in ids:
            for k in range(clients_per_run):
                got: dict[int, float] = {}
                ev = asyncio.Event()
                received.append(got)
                ready.append(ev)
                port = self.ports[k % len(self.ports)]
                tasks.append(asyncio.create_task(self._watch(run_id, got, ev, port, gate)))
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in ready)), 60)
        # the doorbells themselves, heard straight from Redis: when each batch was
        # committed (the writer says so in the message) and when it reached Redis
        rung: dict[tuple[str, int], tuple[float, float]] = {}
        tasks.append(asyncio.create_task(_listen(ids, rung)))
        # every client is connected, and its consumer done reading the (empty) log, before
        # its run starts: the figure is about live events, not about joining late
        await asyncio.sleep(0.5 + 0.005 * len(tasks))
        period = settings.PLANWATCH["THINK_TIME"] if stagger else 0.0
        began = time.monotonic()
        for i, run_id in enumerate(ids):
            await asyncio.sleep(max(0.0, began + i * period / n - time.monotonic()))
            await sync_to_async(dispatch)(run_id, "start")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = await Run.objects.filter(id__in=ids, status__in=Run.FINISHED).acount()
            if done == n:
                break
            await asyncio.sleep(0.05)
        else:
            raise RuntimeError(f"only {done} of {n} runs finished in 120 s")
        last = {r.id: r.last_seq async for r in Run.objects.filter(id__in=ids)}
        watched = list(zip(received, _expand(ids, clients_per_run), strict=True))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the last messages may still be on their way
            if all(len(got) >= last[run_id] for got, run_id in watched):
                break
            await asyncio.sleep(0.02)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        stamps = {
            (e.run_id, e.seq): e.created_at.timestamp()
            async for e in RunEvent.objects.filter(run_id__in=ids).only(
                "run_id", "seq", "created_at")
        }
        out = Pass()
        for got, run_id in watched:
            missing = last[run_id] - len(got)
            if missing:
                raise RuntimeError(f"a client of run {run_id} missed {missing} events")
            for seq, t in got.items():
                stamp = stamps[(run_id, seq)]
                out.from_stamp.append((t - stamp) * 1000)
                committed, heard = rung.get((str(run_id), seq), (None, None))
                if committed is None or heard is None:
                    raise RuntimeError(f"event {seq} of run {run_id} rang no doorbell on Redis")
                out.received.append((t - committed) * 1000)
                out.to_redis.append((heard - committed) * 1000)
                out.from_redis.append((t - heard) * 1000)
        for (run_id, seq), (committed, _) in rung.items():
            if committed is not None:
                out.write.append((committed - stamps[(uuid.UUID(run_id), seq)]) * 1000)
        commits = {str(i): sorted({c for (r, _), (c, _) in rung.items() if r == str(i)})
                   for i in ids}
        first = min(c[0] for c in commits.values())
        out.schedule = [[c - first for c in commits[str(i)]] for i in ids]
        return out

    async def _watch(self, run_id: uuid.UUID, got: dict[int, float], ready: asyncio.Event,
                     port: int, gate: asyncio.Semaphore) -> None:
        from websockets.asyncio.client import connect

        url = f"ws://127.0.0.1:{port}/ws/runs/{run_id}/?after=0"
        headers = {"Cookie": self.cookie, "Origin": f"http://127.0.0.1:{port}"}
        async with gate:
            ws = await connect(url, additional_headers=headers, max_size=None, open_timeout=60)
        async with ws:
            ready.set()
            async for message in ws:
                now = time.time()
                self.frames[0] += 1
                self.frames[1] += len(message)
                for seq in SEQ.findall(message if isinstance(message, str) else ""):
                    got.setdefault(int(seq), now)


async def _listen(ids: list[uuid.UUID], rung: dict[tuple[str, int], tuple[float, float]],
                  subscribed: Callable[[], None] | None = None) -> None:
    """For each event of these runs: when it was committed and when it was heard on Redis."""
    from channels.layers import get_channel_layer

    from dashboard.runs.doorbells import run_group

    layer = get_channel_layer()
    channel = await layer.new_channel()
    for run_id in ids:
        await layer.group_add(run_group(run_id), channel)
    if subscribed is not None:
        subscribed()
    try:
        while True:
            message = await layer.receive(channel)
            now = time.time()
            if message.get("type") != "run.events":
                continue
            for seq in range(message["first"], message["last"] + 1):
                rung.setdefault((message["run_id"], seq), (message["committed_at"], now))
    finally:
        for run_id in ids:
            await layer.group_discard(run_group(run_id), channel)


def _expand(ids: list[uuid.UUID], k: int) -> list[uuid.UUID]:
    return [run_id for run_id in ids for _ in range(k)]


def _queued_runs(n: int) -> list[uuid.UUID]:
    """``n`` queued runs, created like ``run_create`` does but not yet dispatched."""
    from dashboard.models import Run
    from planner.registry import get_graph

    spec = get_graph(GRAPH)
    ids = [uuid.uuid4() for _ in range(n)]
    Run.objects.bulk_create([
        Run(id=i, graph=spec.name, graph_version=spec.version, thread_id=spec.thread_id(str(i)),
            input=spec.make_input(INPUT))
        for i in ids
    ])
    return ids


async def _bare(port: int | tuple[int, ...], schedule: list[list[float]], *,
                clients: int = 1, size: int = 0) -> list[float]:
    """The bare path fed like the runs were: group ``i`` gets a message at each moment of
    ``schedule[i]`` (run ``i``'s commits, from the first), padded to ``size`` bytes, and is
    watched by ``clients`` sockets (dealt out over the bare daphnes of ``port``, as the
    watchers of a run are over Planwatch's); producer → receipt latencies in ms."""
    from channels.layers import get_channel_layer
    from websockets.asyncio.client import connect

    ports = port if isinstance(port, tuple) else (port,)
    layer = get_channel_layer()
    lat: list[float] = []
    gate = asyncio.Semaphore(50)  # handshakes at a time: Twisted's listen backlog (above)

    async def client(i: int, k: int, ready: asyncio.Event) -> None:
        async with gate:
            ws = await connect(f"ws://127.0.0.1:{ports[k % len(ports)]}/bare/{i}/",
                               max_size=None, open_timeout=60)
        async with ws:
            ready.set()
            for _ in schedule[i]:
                message = await asyncio.wait_for(ws.recv(), 60)
                lat.append((time.time() - json.loads(message)["t"]) * 1000)

    n = len(schedule)
    readies = [asyncio.Event() for _ in range(n * clients)]
    tasks = [asyncio.create_task(client(k // clients, k % clients, readies[k]))
             for k in range(n * clients)]
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)
    await asyncio.sleep(0.2 + 0.001 * len(tasks))  # group_add reaches Redis first
    pad = "x" * max(0, size - 40)
    began = time.monotonic()

    async def produce(i: int) -> None:
        for offset in schedule[i]:
            await asyncio.sleep(max(0.0, began + offset - time.monotonic()))
            await layer.group_send(f"bare.{i}", {"type": "bare.msg", "text": json.dumps(
                {"t": time.time(), "pad": pad})})

    await asyncio.gather(*(produce(i) for i in range(n)))
    await asyncio.gather(*tasks)
    return lat


OBSERVE = """
window.__seen = {};
new MutationObserver((records) => {
  const now = performance.timeOrigin + performance.now();
  for (const r of records) for (const n of r.addedNodes) {
    if (n.nodeType !== 1) continue;
    const rows = n.matches("[data-seq]") ? [n] : n.querySelectorAll("[data-seq]");
    for (const row of rows) window.__seen[row.dataset.seq] ??= now;
  }
}).observe(document.body, {childList: true, subtree: true});
"""


@contextlib.contextmanager
def _listening(ids: list[uuid.UUID]) -> Iterator[dict[tuple[str, int], tuple[float, float]]]:
    """:func:`_listen` on a loop of its own in a thread, for synchronous code."""
    rung: dict[tuple[str, int], tuple[float, float]] = {}
    loop = asyncio.new_event_loop()
    subscribed = threading.Event()
    task = loop.create_task(_listen(ids, rung, subscribed.set))

    def serve() -> None:  # the loop is closed in its own thread (channels_redis flushes then)
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(task)
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    if not subscribed.wait(10):
        raise RuntimeError("the doorbell listener did not subscribe in 10 s")
    try:
        yield rung
    finally:
        loop.call_soon_threadsafe(task.cancel)
        thread.join(10)


def _browser(port: int, cookie: str, runs: int) -> dict[str, Any]:
    """Event committed → row in the DOM of the trace view, in Chromium."""
    from playwright.sync_api import sync_playwright

    from dashboard.models import Run
    from dashboard.runs.dispatch import dispatch

    base = f"http://127.0.0.1:{port}"
    lat: list[float] = []
    # Playwright's sync API keeps an event loop in this thread; the ORM calls here are
    # still plain synchronous code, so Django's async-safety guard must stand aside.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        # the page's CSP allows no eval; the bench's own probes (a MutationObserver and the
        # waits on it) are evaluated strings, so the bench context lets them through
        context = browser.new_context(bypass_csp=True)
        name, _, value = cookie.partition("=")
        context.add_cookies([{"name": name, "value": value, "url": base}])
        page = context.new_page()
        for _ in range(runs):
            (run_id,) = _queued_runs(1)
            page.goto(f"{base}/runs/{run_id}/")
            page.evaluate(OBSERVE)
            page.wait_for_function("document.querySelector('[ws-connect]') !== null")
            page.wait_for_timeout(300)  # the socket is open before the run starts
            with _listening([run_id]) as rung:
                dispatch(run_id, "start")
                deadline = time.monotonic() + 60
                while Run.objects.get(id=run_id).status not in Run.FINISHED:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"run {run_id} did not finish in 60 s")
                    time.sleep(0.05)
                last = Run.objects.get(id=run_id).last_seq
                page.wait_for_function(f"Object.keys(window.__seen).length >= {last}",
                                       timeout=10_000)
            seen = page.evaluate("window.__seen")
            lat += [ms - rung[(str(run_id), int(seq))][0] * 1000 for seq, ms in seen.items()]
        browser.close()
    return {"runs": runs, **summary(lat)}


if __name__ == "__main__":
    main()
