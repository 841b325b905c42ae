"""OpenTelemetry export: a run read back from a real OTLP receiver, Arize Phoenix.

Phoenix runs from its own venv, ``.venv-phoenix`` (gitignored), created on first use
(``pip install arize-phoenix``, about 70 s; ``make test-all`` only: it is ``long``) and reused
after; its server starts once per session, offline, on free loopback ports. Outside CI a
Phoenix that cannot be installed or started skips these tests with the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from django.db import connection

from dashboard import services
from dashboard.runs import otel
from tests.conftest import ROOT, free_port, need, wait_run
from tests.support.waterfall import acquisition_log, stored_run

VENV = ROOT / ".venv-phoenix"
PHOENIX = VENV / "bin" / "phoenix"


def _install() -> str:
    """Create the venv and install Phoenix; "" when done, else what went wrong."""
    python = os.environ.get("PLANWATCH_PHOENIX_PYTHON", sys.executable)
    try:
        if not VENV.exists():
            subprocess.run([python, "-m", "venv", str(VENV)], check=True,
                           capture_output=True, timeout=120)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "arize-phoenix"],
                       check=True, capture_output=True, timeout=900)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory) -> Iterator[str]:
    """A Phoenix server's base URL (its OTLP/HTTP receiver and REST API)."""
    problem = "" if PHOENIX.exists() else _install()
    need("Arize Phoenix", not problem and PHOENIX.exists(),
         f"installing it into {VENV} failed ({problem}); run "
         f"`python3.12 -m venv .venv-phoenix && .venv-phoenix/bin/pip install arize-phoenix`")
    port = free_port()
    work: Path = tmp_path_factory.mktemp("phoenix")
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_TELEMETRY_ENABLED": "false"}
    log = (work / "phoenix.log").open("w")
    proc = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240  # migrations and start-up on a busy machine
    up = False
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            up = requests.get(f"{url}/v1/projects", timeout=2).ok
        except requests.RequestException:
            up = False
        if up:
            break
        time.sleep(1)
    if not up:
        proc.terminate()
    need("Arize Phoenix", up, f"`phoenix serve` did not answer on {url} (log: {log.name})")
    yield url
    proc.terminate()
    proc.wait(30)
    log.close()


def _spans_of(url: str, trace_id: str, *, at_least: int) -> list[dict]:
    """The trace's spans as Phoenix stores them (waits for the batch to arrive)."""
    deadline = time.monotonic() + 60  # a deadlock guard, not a speed test
    while True:
        otel.flush()
        body = requests.get(f"{url}/v1/projects/default/spans", params={"limit": 1000},
                            timeout=10).json()
        spans = [s for s in body["data"] if s["context"]["trace_id"] == trace_id]
        if len(spans) >= at_least or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


@pytest.mark.long  # Phoenix's own server: make test-all
def test_phoenix_holds_an_acquisition_run_as_one_trace_of_nested_spans_with_tokens(
        phoenix, on_test_model, operator, settings):
    settings.PLANWATCH = {**settings.PLANWATCH, "OTLP_ENDPOINT": phoenix}
    run = wait_run(services.run_create(graph="acquisition", input={
        "region": "Germany", "currency": "EUR"}, user=operator).id)
    nodes = run.events.filter(kind="node_started").count()
    spans = _spans_of(phoenix, run.id.hex, at_least=nodes + 2)
    by_id = {s["context"]["span_id"]: s for s in spans}
    (root,) = [s for s in spans if not s["parent_id"]]
    assert root["name"] == "acquisition run" and root["span_kind"] == "CHAIN"
    (llm,) = [s for s in spans if s["span_kind"] == "LLM"]
    decide = by_id[llm["parent_id"]]
    assert decide["name"] == "decide" and decide["parent_id"] == root["context"]["span_id"]
    attributes = llm["attributes"]
    assert attributes["llm.token_count.prompt"] == 120
    assert attributes["llm.token_count.completion"] == 30
    assert attributes["gen_ai.usage.input_tokens"] == 120
    assert attributes["gen_ai.request.model"] == "planwatch-test-model"
    assert len([s for s in spans if s["span_kind"] == "CHAIN"]) == nodes + 1


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[int]]]:
    """A loopback OTLP/HTTP receiver: its URL, and the size of each batch it took (200);
    the spans built meanwhile are flushed to it before it stops."""
    batches: list[int] = []

    class Taker(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            batches.append(len(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Taker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", batches
    otel.flush()
    server.shutdown()
    server.server_close()


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
def test_the_export_thread_gives_its_connection_back_after_each_export(receiver, operator,
                                                                        settings):
    """The export runs on a thread that outlives every run: a connection left open there
    held one of Django's pooled connections for good (the PostgreSQL pass's test process,
    whose pool has four, then timed out in test_interrupts_concurrency)."""
    url, batches = receiver
    settings.PLANWATCH = {**settings.PLANWATCH, "OTLP_ENDPOINT": url}
    run = stored_run(operator, acquisition_log())
    otel.export_soon(run.id, after=0, upto=run.last_seq)
    assert otel._worker is not None
    # the thread takes its work in order: this look comes after the export
    left_open = otel._worker.submit(lambda: connection.connection is not None).result(30)
    otel.flush()
    assert batches, "the export sent no spans (it never read the run)"
    assert not left_open
