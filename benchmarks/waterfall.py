"""A run with 200 model calls opens its waterfall in Chromium: page load → waterfall drawn.

``python -m benchmarks.waterfall`` re-creates its own SQLite database
(``var/bench/planwatch_bench_waterfall.sqlite3``), seeds one finished run whose log holds
200 node executions each with one model call (started and finished, with a prompt, an
answer and token usage, as the model-call recorder writes them), serves it with
``manage.py serve`` and opens its trace page in /usr/bin/chromium ``--repeats`` times.
Each time is from the navigation's start to the moment every one of the 200 model-call bars
is in the DOM (``performance.now()`` in the page, after a frame is laid out), with the
first byte's time (the server's share) and the waterfall's own render time. Prints JSON.
Target: p50 under one second.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

from benchmarks.common import free_port, measure_on_fresh_sqlite, process, summary

USER, PASSWORD = "bench-waterfall", "bench-waterfall-pw-1234"
DB_NAME = "planwatch_bench_waterfall"
CALLS = 200
DRAWN = """() => new Promise((done, fail) => {
  const ready = () => document.querySelectorAll('#trace-waterfall .wf-bar.wf-model').length;
  const nav = () => performance.getEntriesByType('navigation')[0];
  const began = performance.now();
  const check = () => ready() >= %(calls)d
    ? requestAnimationFrame(() => done([performance.now(), nav().responseStart]))
    : performance.now() - began > 60000  // a page that never draws them fails, not hangs
      ? fail(new Error(`${ready()} of %(calls)d model-call bars drawn after 60 s`))
      : setTimeout(check, 5);
  check();
})"""


def _seed(calls: int) -> str:
    """One finished acquisition run whose log has ``calls`` nodes, each with a model call."""
    from django.contrib.auth import get_user_model

    from dashboard.models import Run, RunEvent

    user, _ = get_user_model().objects.get_or_create(username=USER)
    user.set_password(PASSWORD)
    user.save()
    t0 = datetime(2026, 11, 5, 12, 0, tzinfo=UTC)
    rows: list[tuple[float, dict[str, Any]]] = [(0, {"kind": "run_started"})]
    for i in range(calls):
        at, task = 0.5 * i, f"task-{i}"
        base = {"call_id": f"call-{i}", "model": "gpt-bench", "provider": "openai",
                "purpose": "acquisition.decide", "kind": "chat"}
        node = {"node": "decide", "task_id": task, "step": i}
        rows += [
            (at, {"kind": "node_started", **node}),
            (at + 0.01, {"kind": "model_started", **node, "payload": {**base, "messages": [
                {"role": "system", "content": "You fill the fields of a TAM estimate. " * 20},
                {"role": "human", "content": f"Iteration {i}: which field next?"}]}}),
            (at + 0.41, {"kind": "model_finished", **node, "duration_ms": 400.0, "payload": {
                **base, "output": {"text": '{"action": "search", "field": "market.price"}',
                                   "tool_calls": [], "structured": None},
                "usage": {"input_tokens": 812, "output_tokens": 41, "total_tokens": 853,
                          "cached_tokens": 0},
                "cost": None, "latency_ms": 400.0, "ttft_ms": None, "error": None}}),
            (at + 0.45, {"kind": "node_finished", **node, "duration_ms": 450.0,
                         "payload": {"update": {}}}),
        ]
    rows.append((0.5 * calls, {"kind": "run_succeeded"}))
    run = Run.objects.create(graph="acquisition", thread_id=f"{uuid.uuid4()}:planner",
                             state=Run.State.SUCCEEDED, created_by=user, started_at=t0,
                             finished_at=t0 + timedelta(seconds=0.5 * calls),
                             last_seq=len(rows))
    # each event when it happened (``at``, what the page draws), and written then
    RunEvent.objects.bulk_create(
        RunEvent(run=run, seq=seq, at=t0 + timedelta(seconds=at), **fields)
        for seq, (at, fields) in enumerate(rows, 1))
    for seq, (at, _) in enumerate(rows, 1):  # created_at is stamped on insert: set it
        RunEvent.objects.filter(run=run, seq=seq).update(created_at=t0 + timedelta(seconds=at))
    return str(run.id)


def _login(base: str) -> str:
    s = requests.Session()
    s.get(f"{base}/accounts/login/", timeout=10)
    r = s.post(f"{base}/accounts/login/", timeout=10, data={
        "username": USER, "password": PASSWORD, "csrfmiddlewaretoken": s.cookies["csrftoken"],
    }, headers={"Referer": f"{base}/accounts/login/"})
    r.raise_for_status()
    return str(s.cookies["sessionid"])


def measure(*, repeats: int = 10, calls: int = CALLS) -> dict[str, Any]:
    """Seed, serve and time the page ``repeats`` times (in this process: Django is set up)."""
    import django
    from playwright.sync_api import sync_playwright

    django.setup()
    # Playwright's sync API keeps an event loop in this thread; the ORM calls here are
    # plain synchronous code, so Django's async-safety guard must stand aside
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    run_id = _seed(calls)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "ALLOWED_HOSTS": "127.0.0.1,localhost"}
    with process([sys.executable, "manage.py", "serve", "--port", str(port)], env=env,
                 log="waterfall-web.log", port=port):
        session = _login(base)
        times: list[float] = []
        server: list[float] = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                         args=["--no-sandbox", "--disable-gpu"])
            context = browser.new_context(bypass_csp=True, viewport={"width": 1400,
                                                                      "height": 900})
            context.add_cookies([{"name": "sessionid", "value": session, "url": base}])
            page = context.new_page()
            page.goto(f"{base}/runs/{run_id}/")  # warm: templates and graph picture cached
            for _ in range(repeats):
                page.goto(f"{base}/runs/{run_id}/", wait_until="commit")
                drawn, first_byte = page.evaluate(DRAWN % {"calls": calls})
                times.append(drawn)
                server.append(first_byte)
            size = len(page.content())
            browser.close()
    return {"model_calls": calls, "page_kib": round(size / 1024), **summary(times),
            "first_byte_p50": summary(server)["p50"], "waterfall_render_ms": _render_ms(run_id)}


def _render_ms(run_id: str) -> float:
    """The waterfall's own share of the page: fold and lay out its bars (median of 5)."""
    import time

    from dashboard.models import Run
    from dashboard.web.presentation import trace

    run = Run.objects.get(id=run_id)
    fold, _ = trace.trace_fold(run=run)
    took = []
    for _ in range(5):
        began = time.perf_counter()
        trace.panels_context(run=run, fold=fold)["waterfall"]()
        took.append((time.perf_counter() - began) * 1000)
    return round(sorted(took)[2], 1)


def main() -> None:
    """Re-create the figure's database, then measure in a process that uses it; print JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(repeats=args.repeats)))
        return
    done = measure_on_fresh_sqlite("benchmarks.waterfall", DB_NAME, args.repeats)
    print(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
