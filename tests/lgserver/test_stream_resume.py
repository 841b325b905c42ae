"""A stream cut before its run stopped (a web process draining, say), resumed as
langgraph-sdk resumes it: at the stream's ``Location``, with ``Last-Event-ID``.

The ``Location`` is the join stream in the stream's own modes, and the resumed stream sends
each event after that id once: the SDK's decoder gives a part without an ``id`` line the
last id it saw (the SSE rule), so a second ``metadata`` would be a repeat of that id."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from langgraph_sdk.sse import SSEDecoder

from dashboard.models import Run, RunEvent
from tests.conftest import api_token, wait_run

pytestmark = pytest.mark.django_db(transaction=True)

Kind = RunEvent.Kind
NODE_EVENTS = (Kind.NODE_STARTED, Kind.NODE_FINISHED, Kind.NODE_FAILED)
"""The log events the ``tasks`` mode sends a part of (each with its seq as id)."""


@pytest.fixture
def api(operator, executor):
    return Client(headers={"x-api-key": api_token(operator)})


async def _drain(response) -> bytes:
    return b"".join([part async for part in response.streaming_content])


def parts(body: bytes, last_event_id: str | None = None) -> list[tuple[str, str | None]]:
    """Each (event, id) as langgraph-sdk's decoder reports it, seeded as the SDK seeds it
    on a reconnect (with the last id it received)."""
    decoder = SSEDecoder(last_event_id=last_event_id)
    found = [decoder.decode(line) for line in body.split(b"\n")]
    return [(part.event, part.id) for part in found if part is not None and part.event]


def streamed(api, modes: list[str]) -> tuple[str, str, bytes, str]:
    """A 4-step echo run streamed to its end in ``modes``: (thread, run id, body, its
    ``Location``)."""
    thread = api.post("/langgraph/threads", {}, content_type="application/json").json()
    response = api.post(f"/langgraph/threads/{thread['thread_id']}/runs/stream",
                        {"assistant_id": "test.echo", "input": {"steps": 4},
                         "stream_mode": modes, "stream_subgraphs": True},
                        content_type="application/json")
    assert response.status_code == 200
    body = async_to_sync(_drain)(response)
    run_id = response["Content-Location"].rsplit("/", 1)[-1]
    assert wait_run(run_id).status == Run.Status.SUCCEEDED
    return thread["thread_id"], run_id, body, response["Location"]


def node_seqs(run_id: str, after: int = 0) -> list[str]:
    return [str(seq) for seq in RunEvent.objects.filter(
        run_id=run_id, kind__in=NODE_EVENTS, seq__gt=after).order_by("seq")
        .values_list("seq", flat=True)]


def test_a_streams_location_is_its_join_stream_in_its_own_modes(api):
    thread, run_id, _, location = streamed(api, ["tasks", "updates"])
    assert location == (f"/threads/{thread}/runs/{run_id}/stream"
                        "?stream_mode=tasks&stream_mode=updates&stream_subgraphs=true")
    resumed = api.get(f"/langgraph{location}", headers={"Last-Event-ID": "1"})
    events = {event for event, _ in parts(async_to_sync(_drain)(resumed), "1")}
    assert events == {"tasks", "updates"}  # (not the join stream's default: values)


def test_a_stream_resumed_after_an_id_sends_each_later_event_once(api):
    _, run_id, body, location = streamed(api, ["tasks"])
    first = parts(body)
    assert first[0] == ("metadata", None)
    assert [i for _, i in first[1:]] == node_seqs(run_id)
    cut = int(node_seqs(run_id)[2])  # the stream cut after its third event
    resumed = api.get(f"/langgraph{location}", headers={"Last-Event-ID": str(cut)})
    again = parts(async_to_sync(_drain)(resumed), str(cut))
    assert [i for _, i in again] == node_seqs(run_id, after=cut)  # each once, none repeated
    assert {event for event, _ in again} == {"tasks"}


def test_a_join_stream_not_resumed_starts_with_its_metadata(api):
    *_, location = streamed(api, ["tasks"])
    for headers in ({}, {"Last-Event-ID": "0"}):  # joined now, or from the start
        joined = api.get(f"/langgraph{location}", headers=headers)
        assert parts(async_to_sync(_drain)(joined))[0] == ("metadata", None)
