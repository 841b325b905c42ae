"""A 214-task decomposition plan watched live in Chromium: does the page keep up?

``python -m benchmarks.live_plan`` re-creates its own SQLite database
(``var/bench/planwatch_bench_live_plan.sqlite3``), serves it with ``manage.py serve`` (runs
execute in that process, the scripted model thinking ``PLANWATCH_THINK_TIME`` seconds a
call, 0.4 s by default, as on a dashboard) and, ``--repeats`` times, starts a decomposition
of breadth 14 (215 tasks) with its trace page open from the start. For each run it reports:

- the final status lag: from the run's end (``finished_at``, stamped by the server on this
  machine's clock) to the moment the page's header said the final status (a
  MutationObserver on ``#trace-status``, ``Date.now()``);
- the main thread's long tasks while watching (PerformanceObserver ``longtask``, installed
  before the page's scripts): the longest, how many over 200 ms, and their sum;
- what the socket sent: frames, bytes, and the largest frame (a live batch sends the rows
  that changed, not the whole waterfall).

Prints JSON. Targets: the final status within 1 s of the run's end; no task over 200 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import requests

from benchmarks.common import (
    free_port,
    measure_on_fresh_sqlite,
    process,
    summary,
)

USER, PASSWORD = "bench-live", "bench-live-pw-1234"
DB_NAME = "planwatch_bench_live_plan"
BREADTH = 14
TIMEOUT_MS = 180_000
WATCH = """() => {
  window.__long = [];
  try {
    new PerformanceObserver(list => list.getEntries().forEach(
      e => window.__long.push(e.duration))).observe({type: "longtask", buffered: true});
  } catch (e) { window.__long = null; }
  const seen = () => {
    const el = document.getElementById("trace-status");
    if (el && /Succeeded|Finished|Failed|Cancelled/.test(el.textContent) && !window.__final)
      window.__final = Date.now();
  };
  new MutationObserver(seen).observe(document, {subtree: true, childList: true,
                                                characterData: true});
}"""


def _user() -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user, _ = get_user_model().objects.get_or_create(username=USER)
    user.set_password(PASSWORD)
    user.save()
    user.user_permissions.add(*Permission.objects.filter(codename="start_run"))


def _login(base: str) -> str:
    s = requests.Session()
    s.get(f"{base}/accounts/login/", timeout=10)
    r = s.post(f"{base}/accounts/login/", timeout=10, data={
        "username": USER, "password": PASSWORD, "csrfmiddlewaretoken": s.cookies["csrftoken"],
    }, headers={"Referer": f"{base}/accounts/login/"})
    r.raise_for_status()
    return str(s.cookies["sessionid"])


def _dump(payload: Any) -> None:
    """Keep a frame for a look (``LIVE_PLAN_DUMP=dir``)."""
    folder = os.environ["LIVE_PLAN_DUMP"]
    os.makedirs(folder, exist_ok=True)
    name = os.path.join(folder, f"{time.monotonic():.3f}.html")
    with open(name, "w") as out:
        out.write(payload if isinstance(payload, str) else str(payload))


def _watch_one(page: Any, base: str) -> dict[str, Any]:
    """Start one plan from the form, watch it to its end; its figures."""
    from dashboard.models import Run

    frames: list[int] = []
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))

    def on_socket(ws: Any) -> None:
        if "/ws/runs/" in ws.url and ws.url.rstrip("/").count("/") >= 5:
            ws.on("framereceived", lambda payload: frames.append(
                len(payload if isinstance(payload, (bytes, str)) else str(payload))))
            if os.environ.get("LIVE_PLAN_DUMP"):
                ws.on("framereceived", lambda payload: _dump(payload))

    page.on("websocket", on_socket)
    cdp = None
    if os.environ.get("LIVE_PLAN_PROFILE"):
        cdp = page.context.new_cdp_session(page)
        cdp.send("Profiler.enable")
        cdp.send("Profiler.setSamplingInterval", {"interval": 1000})
    page.goto(f"{base}/runs/new/?graph=decomposition")
    page.fill("#start-form [name=breadth]", str(BREADTH))
    if cdp is not None:
        cdp.send("Profiler.start")
    page.click("#start-form button[type=submit]")
    page.wait_for_url("**/runs/*-*/", timeout=30_000)
    run_id = page.url.rstrip("/").rsplit("/", 1)[1]
    try:
        page.wait_for_function("() => window.__final", timeout=TIMEOUT_MS, polling=100)
    except Exception as exc:  # say where the page stood
        facts = page.evaluate("() => [document.getElementById('trace-status')?.textContent,"
                              " document.getElementById('trace-cursor')?.dataset.lastSeq]")
        raise RuntimeError(f"the page never said the final status: {facts}; "
                           f"console: {problems[-5:]}") from exc
    page.wait_for_timeout(500)  # the long tasks of the last batches are reported
    shown_at, long = page.evaluate("[window.__final, window.__long]")
    if cdp is not None:
        _print_profile(cdp.send("Profiler.stop")["profile"])
        counted = page.evaluate("window.__events || {}")
        print("events dispatched: " + json.dumps(
            dict(sorted(counted.items(), key=lambda kv: -kv[1])[:20])), file=sys.stderr)
    page.remove_listener("websocket", on_socket)
    run = Run.objects.get(id=run_id)
    for _ in range(50):
        if run.finished_at is not None:
            break
        time.sleep(0.1)
        run.refresh_from_db()
    from dashboard.web.presentation import trace

    fold, _ = trace.trace_fold(run=run)
    tasks = sum(1 for t in fold.tasks.values() if t.get("parent") is not None)
    lag = shown_at / 1000 - run.finished_at.timestamp()
    return {"run": run_id, "status": run.status, "events": run.last_seq,
            "took_s": round((run.finished_at - run.started_at).total_seconds(), 2),
            "tasks": tasks, "final_status_lag_ms": round(lag * 1000, 1),
            "longest_task_ms": round(max(long or [0.0]), 1),
            "tasks_over_200ms": sum(1 for d in long or [] if d > 200),
            "long_tasks_sum_ms": round(sum(long or []), 1),
            "frames": len(frames), "bytes": sum(frames), "largest_frame": max(frames or [0])}


COUNT_EVENTS = """() => {
  window.__events = {};
  const dispatch = EventTarget.prototype.dispatchEvent;
  EventTarget.prototype.dispatchEvent = function (e) {
    window.__events[e.type] = (window.__events[e.type] || 0) + 1;
    return dispatch.call(this, e);
  };
}"""
"""With a profile: the events scripts dispatched, by type (htmx's own among them)."""


def _print_profile(profile: dict[str, Any]) -> None:
    """The functions that took the main thread longest, by self time and by total time
    (with what they called), to stderr."""
    nodes = {n["id"]: n for n in profile["nodes"]}
    parent = {child: n["id"] for n in profile["nodes"] for child in n.get("children", ())}

    def name_of(node: int) -> str:
        frame = nodes[node]["callFrame"]
        return f"{frame['functionName'] or '(anon)'} {frame['url'].rsplit('/', 1)[-1]}"

    took: dict[str, float] = {}
    total: dict[str, float] = {}
    deltas = profile.get("timeDeltas") or []
    for sample, delta in zip(profile.get("samples") or [], deltas, strict=False):
        took[name_of(sample)] = took.get(name_of(sample), 0.0) + delta / 1000
        stack, node = set(), sample
        while node is not None:
            stack.add(name_of(node))
            node = parent.get(node)
        for name in stack:
            total[name] = total.get(name, 0.0) + delta / 1000
    for title, table in (("self", took), ("total", total)):
        for name, ms in sorted(table.items(), key=lambda kv: -kv[1])[:25]:
            print(f"{ms:9.1f} ms  {title:5} {name}", file=sys.stderr)


def measure(*, repeats: int = 3) -> dict[str, Any]:
    """Serve and watch ``repeats`` plans (in this process: Django is set up)."""
    import django
    from playwright.sync_api import sync_playwright

    django.setup()
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's loop; plain ORM calls
    _user()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "ALLOWED_HOSTS": "127.0.0.1,localhost"}
    runs: list[dict[str, Any]] = []
    with process([sys.executable, "manage.py", "serve", "--port", str(port)], env=env,
                 log="live-plan-web.log", port=port):
        session = _login(base)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                         args=["--no-sandbox", "--disable-gpu"])
            context = browser.new_context(bypass_csp=True, viewport={"width": 1400,
                                                                      "height": 900})
            context.add_cookies([{"name": "sessionid", "value": session, "url": base}])
            context.add_init_script(f"({WATCH})()")
            if os.environ.get("LIVE_PLAN_PROFILE"):
                context.add_init_script(f"({COUNT_EVENTS})()")
            page = context.new_page()
            for _ in range(repeats):
                runs.append(_watch_one(page, base))
            browser.close()
    lags = [r["final_status_lag_ms"] for r in runs]
    longest = [r["longest_task_ms"] for r in runs]
    return {"breadth": BREADTH, "think_time_s": float(os.environ.get("PLANWATCH_THINK_TIME",
                                                                       "0.4")),
            "final_status_lag_ms": summary(lags), "longest_task_ms": summary(longest),
            "load_avg": os.getloadavg(), "runs": runs}


def main() -> None:
    """Re-create the figure's database, then measure in a process that uses it; print JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(repeats=args.repeats)))
        return
    done = measure_on_fresh_sqlite("benchmarks.live_plan", DB_NAME, args.repeats,
                                   PLANWATCH_THINK_TIME=os.environ.get(
                                       "PLANWATCH_THINK_TIME", "0.4"))
    if os.environ.get("LIVE_PLAN_PROFILE"):
        print("\n".join(line for line in done.stderr.splitlines()
                        if " ms  " in line or line.startswith("events dispatched")),
              file=sys.stderr)
    print(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
