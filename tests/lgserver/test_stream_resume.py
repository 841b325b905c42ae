"""A stream cut before its run stopped (a web process draining, say), resumed as
langgraph-sdk resumes it: at the stream's ``Location``, with ``Last-Event-ID``.

The ``Location`` is the join stream in the stream's own modes, and the resumed stream sends
each event after that id once: the SDK's decoder gives a part without an ``id`` line the
last id it saw (the SSE rule), so a second ``metadata`` would be a repeat of that id."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import RequestAborted
from django.test import Client
from langgraph_sdk.sse import SSEDecoder

from dashboard.lgserver.stream import StreamCut
from dashboard.models import Run, RunEvent
from dashboard.runs import follow
from dashboard.runs.follow import stop_following
from tests.conftest import api_token, wait_run

# the follower reads the log and hears doorbells differently on PostgreSQL + Redis: both
pytestmark = [pytest.mark.pg, pytest.mark.both, pytest.mark.django_db(transaction=True)]

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
    on a reconnect (with the last id it received), up to the ``end`` that closes a stream
    whose run stopped (it has no id of its own: the decoder repeats the last one)."""
    decoder = SSEDecoder(last_event_id=last_event_id)
    found = [decoder.decode(line) for line in body.split(b"\n")]
    events = [(part.event, part.id) for part in found if part is not None and part.event]
    if events and events[-1][0] == "end":
        return events[:-1]
    return events


def ends(body: bytes) -> bool:
    """Whether the stream closed with ``end`` (its run stopped), after every other part."""
    return body.endswith(b"\n\n") and body.rsplit(b"event: ", 1)[-1].startswith(b"end\n")


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
    resumed = async_to_sync(_drain)(
        api.get(f"/langgraph{location}", headers={"Last-Event-ID": "1"}))
    events = {event for event, _ in parts(resumed, "1")}
    assert events == {"tasks", "updates"}  # (not the join stream's default: values)
    assert ends(resumed)


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


def test_an_id_this_server_never_sent_resumes_nothing_the_stream_goes_on_from_now(api):
    """As LangGraph's server, which replays only after an id it sent (Aegra's suite sends
    ``mock_event_5``): not a 422, and nothing of the run replayed."""
    *_, location = streamed(api, ["tasks"])
    for foreign in ("mock_event_5", "1719876543210-0", "9" * 40, "-3"):
        joined = api.get(f"/langgraph{location}", headers={"Last-Event-ID": foreign})
        assert joined.status_code == 200
        body = async_to_sync(_drain)(joined)
        assert parts(body) == [("metadata", None)] and ends(body)  # the run had ended


async def _read_through_a_drain(response, ids_before_drain: int
                                ) -> tuple[bytes, Exception | None]:
    """Read the stream; once it sent ``ids_before_drain`` ids, this process drains."""
    body, cut = b"", None
    try:
        async for part in response.streaming_content:
            body += part
            if body.count(b"\nid: ") == ids_before_drain:
                stop_following()
    except Exception as exc:  # what Django's handler gets from the stream
        cut = exc
    return body, cut


def test_a_stream_a_draining_process_ends_is_cut_and_resumed_to_its_end(api, monkeypatch,
                                                                        tmp_path):
    """Ended cleanly, the stream would make langgraph-sdk ask the run's status, and a run
    that ended meanwhile was never resumed: its last events were lost."""
    monkeypatch.setattr(follow, "_leaving", threading.Event())  # this test's drain only
    hold = tmp_path / "hold"
    hold.touch()
    thread = api.post("/langgraph/threads", {}, content_type="application/json").json()
    response = api.post(f"/langgraph/threads/{thread['thread_id']}/runs/stream",
                        {"assistant_id": "test.echo", "stream_mode": ["tasks"], "input": {
                            "steps": 6, "delay": 0.2, "held_by": str(hold)}},
                        content_type="application/json")
    body, cut = async_to_sync(_read_through_a_drain)(response, 2)
    assert isinstance(cut, StreamCut)  # not finished: the client reconnects, whatever
    assert isinstance(cut, RequestAborted)  # (Django ends the request, the response unfinished)
    run_id = response["Content-Location"].rsplit("/", 1)[-1]
    assert Run.objects.get(id=run_id).status == Run.Status.RUNNING
    follow._leaving.clear()  # the other process, where the client reconnects
    hold.unlink()
    assert wait_run(run_id).status == Run.Status.SUCCEEDED  # it ended before the reconnect
    received = [i for _, i in parts(body) if i]
    resumed = api.get(f"/langgraph{response['Location']}",
                      headers={"Last-Event-ID": received[-1]})
    received += [i for _, i in parts(async_to_sync(_drain)(resumed), received[-1])]
    assert received == node_seqs(run_id)


async def _answer_through_a_drain(response) -> tuple[bytes, Exception | None]:
    """Read a wait or join answer; once its first keep-alive came, this process drains."""
    body, cut = b"", None
    try:
        async for part in response.streaming_content:
            body += part
            stop_following()
    except Exception as exc:  # what Django's handler gets from the answer
        cut = exc
    return body, cut


@pytest.mark.parametrize("how", ["wait", "join"])
def test_a_wait_or_join_a_draining_process_answers_is_cut_not_answered(api, monkeypatch,
                                                                      tmp_path, settings,
                                                                      how):
    """Answered with the values so far, langgraph-sdk's ``wait``/``join`` would take a run
    still running for ended; cut, the SDK asks again at the answer's ``Location``."""
    monkeypatch.setattr(follow, "_leaving", threading.Event())  # this test's drain only
    settings.PLANWATCH = {**settings.PLANWATCH, "STREAM_KEEPALIVE_SECONDS": 0.2}
    hold = tmp_path / "hold"
    hold.touch()
    thread = api.post("/langgraph/threads", {}, content_type="application/json").json()["thread_id"]
    body = {"assistant_id": "test.echo",
            "input": {"steps": 6, "delay": 0.5, "held_by": str(hold)}}
    if how == "wait":
        response = api.post(f"/langgraph/threads/{thread}/runs/wait", body,
                            content_type="application/json")
    else:
        run = api.post(f"/langgraph/threads/{thread}/runs", body,
                       content_type="application/json").json()
        response = api.get(f"/langgraph/threads/{thread}/runs/{run['run_id']}/join")
    assert response.status_code == 200
    answered, cut = async_to_sync(_answer_through_a_drain)(response)
    assert isinstance(cut, StreamCut), answered  # unfinished: the client asks again
    assert not answered.strip()  # no values sent as if the run had ended
    assert response["Location"].endswith("/join")  # where langgraph-sdk asks again
    run_id = response["Content-Location"].rsplit("/", 1)[-1]
    assert Run.objects.get(id=run_id).status == Run.Status.RUNNING
    hold.unlink()
    assert wait_run(run_id).status == Run.Status.SUCCEEDED


def test_a_stream_of_a_run_that_stopped_finishes_even_while_draining(api, monkeypatch):
    monkeypatch.setattr(follow, "_leaving", threading.Event())
    *_, location = streamed(api, ["tasks"])
    stop_following()
    joined = async_to_sync(_drain)(
        api.get(f"/langgraph{location}", headers={"Last-Event-ID": "1"}))
    assert [e for e, _ in parts(joined, "1")][-1] == "tasks"
    assert ends(joined)


class _Body(httpx.AsyncByteStream):
    """A response body: ``chunks``, then the connection breaks (``broken``) or ends."""

    def __init__(self, chunks: list[bytes], *, broken: bool) -> None:
        self.chunks, self.broken = chunks, broken

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.broken:
            raise httpx.RemoteProtocolError("incomplete chunked read")


@pytest.mark.parametrize("broken", [False, True])
def test_langgraph_sdk_resumes_a_broken_stream_but_not_a_finished_one_of_an_ended_run(broken):
    """Why a drain cuts a stream (:class:`StreamCut`) rather than finishing it: the
    SDK resumes a stream that ended cleanly only if the run still runs."""
    from langgraph_sdk import get_client

    base = "/threads/t/runs/r"
    requests: list[tuple[str, str | None]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append((request.url.path, request.headers.get("Last-Event-ID")))
        sse = {"Content-Type": "text/event-stream", "Location": f"{base}/stream"}
        if request.url.path == f"/langgraph{base}":  # the run, asked after a clean end
            return httpx.Response(200, json={"run_id": "r", "status": "success"})
        if request.method == "POST":  # cut after the event 5; the run ends meanwhile
            return httpx.Response(200, headers=sse, stream=_Body(
                [b"event: metadata\ndata: {}\n\n", b"event: tasks\ndata: {}\nid: 5\n\n"],
                broken=broken))
        return httpx.Response(200, headers=sse, stream=_Body(
            [b"event: tasks\ndata: {}\nid: 6\n\n"], broken=False))

    async def ids() -> list[str | None]:
        http = httpx.AsyncClient(base_url="http://planwatch/langgraph",
                                 transport=httpx.MockTransport(answer))
        client = get_client(url="http://planwatch/langgraph", api_key="k")
        client.http.client = http
        try:
            return [p.id async for p in client.runs.stream("t", "a", stream_mode="tasks")
                    if p.event == "tasks"]
        finally:
            await http.aclose()

    received = asyncio.run(ids())
    if broken:
        assert received == ["5", "6"]
        assert (f"/langgraph{base}/stream", "5") in requests  # resumed after the event 5
    else:  # the event 6 is lost: why a drain must not finish a stream cleanly
        assert received == ["5"]
        assert requests[1:] == [(f"/langgraph{base}", None)]  # it asked the run; no more
