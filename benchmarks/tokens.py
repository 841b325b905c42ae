"""What streaming a model's tokens costs the executor: one run at a time, in-process on
SQLite, a graph whose one node streams a 50-chunk answer from a loopback model.

``python -m benchmarks.tokens [--runs 12] [--chunk-delay S]`` times runs with
``Run.stream_tokens`` off (chunks told to nobody, as before token streaming) and on (each
chunk handed to the run's TokenBell and sent on the in-memory layer), interleaved, plus
runs on with one watcher following the run in ``messages-tuple`` mode (its parts made in
the same process). Per run: the executor's time from its claim to its final write
(``started_at`` → ``finished_at``) and this process's CPU time, the median and the spread
of a dozen, and the token messages sent. Not part of ``make bench``; the database is
``var/bench/tokens.sqlite3``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRAPH_PY = '''
import os
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic import SecretStr


async def talk(state: MessagesState) -> dict:
    model = ChatOpenAI(model="planwatch-test-model", api_key=SecretStr("k"),
                       base_url=os.environ["PLANWATCH_TEST_OPENAI_URL"], streaming=True,
                       stream_usage=True, max_retries=0)
    return {"messages": [await model.ainvoke(state["messages"])]}


graph = StateGraph(MessagesState)
graph.add_node("talk", talk)
graph.add_edge(START, "talk")
graph.add_edge("talk", END)
talk50 = graph.compile()
'''


def setup(chunk_delay: float) -> object:
    """A fresh SQLite database, the loopback model (50 chunks of 8 characters,
    ``chunk_delay`` seconds apart), Django."""
    sys.path.insert(0, str(ROOT))
    from tests.openai_server import OpenAIServer

    server = OpenAIServer().start()
    server.reply = "".join(f"tok{n:04d}." for n in range(50))  # 8 characters a chunk
    server.chunk_delay = chunk_delay
    project = Path(tempfile.mkdtemp(prefix="tokens-bench-"))
    (project / "talking.py").write_text(GRAPH_PY)
    (project / "langgraph.json").write_text(json.dumps(
        {"dependencies": ["."], "graphs": {"talk50": "./talking.py:talk50"}}))
    db = ROOT / "var" / "bench" / "tokens.sqlite3"
    db.parent.mkdir(parents=True, exist_ok=True)
    for leftover in db.parent.glob("tokens.sqlite3*"):
        leftover.unlink()
    os.environ.update(DATABASE_URL=f"sqlite:///{db}", PLANWATCH_TEST_OPENAI_URL=server.url,
                      PLANWATCH_LANGGRAPH_CONFIG=str(project / "langgraph.json"),
                      DJANGO_SETTINGS_MODULE="config.settings", PLANWATCH_THINK_TIME="0")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return server


def one_run(*, tokens: bool, watch: bool) -> tuple[float, float]:
    """One run to its end: the executor's milliseconds (claim → final write) and this
    process's CPU milliseconds meanwhile."""
    import asyncio
    import threading

    from dashboard import services
    from dashboard.models import Run

    options = services.RunOptions()
    if hasattr(Run, "stream_tokens"):  # (the code before token streaming has no such field)
        options = services.RunOptions(stream_tokens=tokens)
    cpu = time.process_time()
    run = services.run_create(graph="talk50", input={"messages": [
        {"type": "human", "content": "hi"}]}, user=None, options=options)
    watcher = None
    if watch:
        from dashboard.lgserver.stream import aevents

        async def consume() -> None:
            async for _ in aevents(run.id, modes=["messages-tuple"], subgraphs=False,
                                   after=0, keepalive=0):
                pass

        watcher = threading.Thread(target=asyncio.run, args=(consume(),))
        watcher.start()
    while True:
        run.refresh_from_db()
        if run.status in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.005)
    if watcher is not None:
        watcher.join(10)
    assert run.status == "succeeded", run.error_message
    return ((run.finished_at - run.started_at).total_seconds() * 1000,
            (time.process_time() - cpu) * 1000)


def main() -> None:
    """Warm up, then interleave the configurations and print their medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--label", default="")
    parser.add_argument("--chunk-delay", type=float, default=0.0,
                        help="seconds between two chunks (0: as fast as the loopback goes)")
    args = parser.parse_args()
    server = setup(args.chunk_delay)
    import importlib

    sent = [0]
    try:
        token_module = importlib.import_module("dashboard.runs.tokens")
    except ImportError:  # the code before token streaming
        token_module = None
    if token_module is not None:
        real = token_module.asend

        async def counted(group: str, message: dict) -> None:
            sent[0] += 1
            await real(group, message)

        token_module.asend = counted
    configs = {"off": (False, False), "on": (True, False), "on+watcher": (True, True)}
    for tokens, watch in configs.values():  # warm-up: imports, graph build, pools
        one_run(tokens=tokens, watch=watch)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
    messages: dict[str, int] = dict.fromkeys(configs, 0)
    for _ in range(args.runs):
        for name, (tokens, watch) in configs.items():
            before = sent[0]
            times[name].append(one_run(tokens=tokens, watch=watch))
            messages[name] += sent[0] - before
    print(f"{args.label} {args.runs} runs each, 50 chunks a run, {args.chunk_delay * 1000:g} ms "
          "apart (ms; median, min-max)")
    for name, rows in times.items():
        wall, cpu = [r[0] for r in rows], [r[1] for r in rows]
        print(f"  {name:11} executor {statistics.median(wall):6.1f} "
              f"({min(wall):.1f}-{max(wall):.1f})  cpu {statistics.median(cpu):6.1f} "
              f"({min(cpu):.1f}-{max(cpu):.1f})  token messages/run "
              f"{messages[name] / args.runs:.1f}")
    server.stop()  # type: ignore[attr-defined]
    from dashboard.runs.dispatch import reset_executor

    reset_executor()


if __name__ == "__main__":
    main()
