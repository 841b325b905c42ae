"""``GET /api/runs/<id>/export/`` is streamed, a piece at a time, in the very bytes the
whole document rendered by DRF had."""

from __future__ import annotations

import pytest
from django.utils import timezone
from rest_framework.renderers import JSONRenderer

from dashboard import services
from dashboard.web.presentation import exports
from tests.conftest import wait_run

pytestmark: list = []  # a read of the event log, the same on both databases


@pytest.mark.parametrize("chunk", [2, 500])
def test_the_streamed_export_has_the_bytes_of_the_whole_document(
        executor, operator, client, monkeypatch, chunk):
    monkeypatch.setattr(exports, "CHUNK", chunk)
    run = wait_run(services.run_create(graph="acquisition", input={
        "region": "Germany", "currency": "EUR"}, user=operator).id)
    client.force_login(operator)
    # the figures of a waiting run grow with the clock: both documents at one moment
    moment = timezone.now()
    monkeypatch.setattr(exports.timezone, "now", lambda: moment)
    response = client.get(f"/api/runs/{run.id}/export/")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response.streaming  # not built whole in memory
    whole = JSONRenderer().render(exports.run_export(run=run))
    assert b"".join(response) == whole
    assert b'"model_calls":[{' in whole  # the run made model calls, joined in the stream


def test_a_piece_is_written_as_drf_writes_it():
    value = {"t": "line\u2028sep\u2029ü", "n": [1.5, None, True]}
    assert exports._dumps(value).encode() == JSONRenderer().render(value)


def test_model_calls_are_joined_in_start_order_however_they_interleave():
    started = {"kind": "model_started", "node": "n", "namespace": "", "task_id": "t",
               "step": 1, "created_at": None}
    finished = {**started, "kind": "model_finished"}

    def event(base, seq, call, **payload):
        return {**base, "seq": seq, "payload": {"call_id": call, **payload}}

    events = [event(started, 1, "a", messages=["A?"]), event(started, 2, "b", messages=["B?"]),
              event(finished, 3, "b", answer="B"), event(started, 4, "c", messages=["C?"]),
              event(finished, 5, "a", answer="A")]  # c never finishes
    assert list(exports._model_calls(events)) == exports.messages_of(events)
