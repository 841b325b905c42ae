"""One figure for each quantity: the header, the waterfall, the REST detail, the export and
the OpenTelemetry run span say the same working time, waits and model time."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest

from dashboard.models import Run
from dashboard.runs import otel
from tests.support.waterfall import T0, Log, acquisition_log, stored_run


def _as_run_really_is(run: Run) -> Run:
    """A run is claimed before its first event and its row finishes after its last one:
    the run row's clock is not the log's."""
    Run.objects.filter(id=run.id).update(started_at=T0 - timedelta(seconds=1),
                                         finished_at=T0 + timedelta(seconds=15.5))
    return Run.objects.get(id=run.id)


@pytest.mark.django_db
def test_the_page_the_api_the_export_and_the_spans_give_the_same_figures(
        operator, client, settings, monkeypatch):
    run = _as_run_really_is(stored_run(operator, acquisition_log()))
    client.force_login(operator)
    page = client.get(f"/runs/{run.id}/").content.decode()
    header = page[page.index('id="trace-live"'):page.index('id="trace-actions"')]
    waterfall = page[page.index('id="trace-waterfall"'):page.index('id="waterfall-detail"')]
    assert re.search(r'id="trace-working" class="nowrap">5\.0 s<', header)
    assert re.search(r'id="trace-waiting" class="nowrap">10\.0 s<', header)
    assert re.search(r"Working time <b>5\.0 s</b>", waterfall)
    assert re.search(r'id="wf-human">10\.0 s<', waterfall)
    figures = client.get(f"/api/runs/{run.id}/").json()["figures"]
    assert (figures["working_seconds"], figures["waiting_seconds"],
            figures["answer_wait_seconds"], figures["paused_seconds"],
            figures["model_seconds"]) == (5.0, 10.0, 10.0, 0.0, 2.0)
    exported = json.loads(b"".join(client.get(f"/api/runs/{run.id}/export/")))["header"]["figures"]
    assert exported == figures
    # the runs list too (its duration cell is start to end: the run row's clock)
    listing = client.get("/").content.decode()
    cell = listing[listing.index(f'id="run-{run.id}-duration"'):]
    cell = cell[:cell.index("</td>")]
    assert re.search(r'class="run-working">5\.0 s<', cell)
    assert re.search(r'class="run-waiting">10\.0 s<', cell)

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans, ids = InMemorySpanExporter(), otel._Ids()
    provider = TracerProvider(id_generator=ids)  # type: ignore[arg-type]
    provider.add_span_processor(SimpleSpanProcessor(spans))
    monkeypatch.setattr(otel, "_tracer", lambda: (provider, provider.get_tracer("t"), ids))
    otel.export_run(run.id, after=0, upto=run.last_seq)
    (root,) = [s for s in spans.get_finished_spans() if s.parent is None]
    assert (root.attributes["planwatch.working_seconds"],
            root.attributes["planwatch.waiting_seconds"],
            root.attributes["planwatch.model_seconds"]) == (5.0, 10.0, 2.0)
    assert (root.end_time - root.start_time) / 1e9 == pytest.approx(15.0)


@pytest.mark.django_db
def test_an_unanswered_question_is_a_visible_wait_that_grows_with_the_clock(operator, client):
    log = (Log().add(0, "run_started").node(0, 1, "decide", "t1", 1)
           .add(1, "node_started", "ask_user", "t2", step=2)
           .add(1.2, "interrupt_raised", "ask_user", "t2", step=2,
                payload={"interrupt_id": "i1"}))
    run = stored_run(operator, log)
    Run.objects.filter(id=run.id).update(state=Run.State.INTERRUPTED, finished_at=None)
    client.force_login(operator)
    page = client.get(f"/runs/{run.id}/").content.decode()
    header = page[page.index('id="trace-live"'):page.index('id="trace-actions"')]
    waterfall = page[page.index('id="trace-waterfall"'):page.index('id="waterfall-detail"')]
    # the wait has lasted from 1.2 s into the run until now (the log is of November 2026)
    waited = re.search(r'id="trace-waiting" class="nowrap"[^>]*>([^<]+)<', header)
    assert waited and "min" in waited.group(1)
    assert re.search(r'class="wf-bar wf-human wf-open"[^>]*style="--x:[\d.]+;--w:'
                     r'(?!0\.0000")[\d.]+"', waterfall)
    # the page ticks the open wait with its clock (static/planwatch/app.js), from its start
    since = (T0 + timedelta(seconds=1.2)).isoformat()
    assert f'<span class="wf-dur" data-started="{since}">' in waterfall
    assert re.search(r'id="wf-human" data-started="[^"]+"', waterfall)
    # the runs list ticks the same wait, from the same figures
    listing = client.get("/").content.decode()
    listed = re.search(rf'id="run-{run.id}-duration".*?class="run-waiting" data-started='
                       r'"([^"]+)">([^<]+)<', listing, re.S)
    assert listed and "min" in listed.group(2)


@pytest.mark.django_db
def test_the_header_and_the_waterfall_tick_the_open_wait_from_the_same_moment(operator,
                                                                              client):
    log = (Log().add(0, "run_started").node(0, 1, "decide", "t1", 1)
           .add(1, "node_started", "ask_user", "t2", step=2)
           .add(1.2, "interrupt_raised", "ask_user", "t2", step=2,
                payload={"interrupt_id": "i1"}))
    run = stored_run(operator, log)
    Run.objects.filter(id=run.id).update(state=Run.State.INTERRUPTED, finished_at=None)
    client.force_login(operator)
    page = client.get(f"/runs/{run.id}/").content.decode()
    head = re.search(r'id="trace-waiting" class="nowrap" data-started="([^"]+)"', page)
    flow = re.search(r'id="wf-human" data-started="([^"]+)"', page)
    assert head and flow
    from datetime import datetime
    apart = datetime.fromisoformat(head.group(1)) - datetime.fromisoformat(flow.group(1))
    assert abs(apart.total_seconds()) < 0.5, (head.group(1), flow.group(1))
