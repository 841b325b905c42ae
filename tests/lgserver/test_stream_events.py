"""LangGraph's stream semantics through the official SDK: a stream ends with ``end`` (its
run and status), a failed run's ``error`` event ends its stream (and its join stream),
and a stream sends ``: heartbeat`` comments (a waiting ``wait`` or ``join`` a newline)
every ``PLANWATCH_STREAM_KEEPALIVE_SECONDS``, as LangGraph's server does; the ``events``
mode in astream_events v2's shape; ``on_disconnect: "cancel"``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from langgraph_sdk import get_sync_client

from dashboard.models import Run, RunEvent
from tests.conftest import api_token, served

pytestmark = [pytest.mark.pg, pytest.mark.server, pytest.mark.django_db(transaction=True)]

FAILED = {"error": "ValueError", "message": "cannot sleep"}


def test_a_failed_run_streams_an_error_event_last(sdk):
    parts = list(sdk.runs.stream(None, "nap", input={"fail": "sleep"},
                                 stream_mode=["values", "updates"]))
    assert parts[0].event == "metadata"
    assert parts[-1].event == "error" and parts[-1].data == FAILED
    assert [p.event for p in parts].count("error") == 1
    assert "end" not in [p.event for p in parts]  # its error is its end


def test_a_stream_ends_with_end_naming_its_run_and_how_it_stopped(sdk):
    """langgraph-sdk's ``EndStreamEvent``: a client knows the run stopped without asking."""
    parts = list(sdk.runs.stream(None, "nap", input={}, stream_mode=["values"]))
    run_id = parts[0].data["run_id"]
    assert parts[0].event == "metadata" and "values" in [p.event for p in parts]
    assert parts[-1].event == "end" and [p.event for p in parts].count("end") == 1
    assert parts[-1].data == {"run_id": run_id, "status": "success"}
    thread = sdk.threads.create()
    asked = list(sdk.runs.stream(thread["thread_id"], "orders", input={"item": "pen"},
                                 stream_mode="updates"))
    assert asked[-1].event == "end" and asked[-1].data["status"] == "interrupted"
    assert [p.event for p in asked].count("end") == 1


def test_the_join_stream_of_a_failed_run_ends_with_its_error(sdk):
    thread = sdk.threads.create()
    run = sdk.runs.create(thread["thread_id"], "nap", input={"fail": "sleep"})
    assert sdk.runs.join(thread["thread_id"], run["run_id"])["__error__"] == FAILED
    parts = list(sdk.runs.join_stream(thread["thread_id"], run["run_id"]))
    assert parts[-1].event == "error" and parts[-1].data == FAILED


def test_wait_answers_a_failed_run_with_its_error(sdk):
    thread = sdk.threads.create()
    answer = sdk.runs.wait(thread["thread_id"], "nap", input={"fail": "sleep"},
                           raise_error=False)
    assert answer["__error__"] == FAILED
    with pytest.raises(Exception, match=r"^ValueError: cannot sleep$"):  # the SDK's own
        sdk.runs.wait(None, "nap", input={"fail": "sleep"})


@pytest.fixture(scope="module")
def quick_keepalive(django_db_setup, django_db_blocker, langgraph_json) -> Iterator[str]:
    """Planwatch with a heartbeat after 0.2 s of silence."""
    with served(django_db_blocker, PLANWATCH_LANGGRAPH_CONFIG=str(langgraph_json),
                PLANWATCH_STREAM_KEEPALIVE_SECONDS="0.2") as url:
        yield f"{url}/langgraph"


def raw_stream(url: str, user, path: str, payload: dict) -> list[str]:
    """The lines of an SSE response, comments included (the SDK skips them)."""
    with httpx.stream("POST", f"{url}{path}", json=payload, timeout=30,
                      headers={"x-api-key": api_token(user)}) as response:
        assert response.status_code == 200
        return list(response.iter_lines())


def test_a_silent_stream_sends_heartbeat_comments(quick_keepalive, sdk_user):
    lines = raw_stream(quick_keepalive, sdk_user, "/runs/stream",
                       {"assistant_id": "nap", "input": {"seconds": 1.5}})
    assert lines.count(": heartbeat") >= 2
    assert "event: values" in lines  # and the run's events around them
    client = get_sync_client(url=quick_keepalive, api_key=api_token(sdk_user))
    parts = list(client.runs.stream(None, "nap", input={"seconds": 0.6}))
    assert parts[-2].event == "values" and parts[-2].data == {"seconds": 0.6, "done": True}
    assert parts[-1].event == "end"


def test_wait_and_join_send_a_newline_while_the_run_goes_on(quick_keepalive, sdk_user):
    """LangGraph's server keeps a /wait or /join answer alive with b"\\n" chunks (JSON
    ignores the leading whitespace; Aegra's suite counts them)."""
    headers = {"x-api-key": api_token(sdk_user)}
    with httpx.Client(base_url=quick_keepalive, headers=headers, timeout=30) as http:
        thread = http.post("/threads", json={}).json()["thread_id"]
        with http.stream("POST", f"/threads/{thread}/runs/wait",
                         json={"assistant_id": "nap", "input": {"seconds": 1.0}}) as answer:
            chunks = list(answer.iter_raw())
        assert answer.headers["content-type"].startswith("application/json")
        body = b"".join(chunks)
        assert body.startswith(b"\n\n") and body.count(b"\n") >= 3
        assert json.loads(body) == {"seconds": 1.0, "done": True}
        run = http.post(f"/threads/{thread}/runs",
                        json={"assistant_id": "nap", "input": {"seconds": 0.7}}).json()
        joined = http.get(f"/threads/{thread}/runs/{run['run_id']}/join").content
        assert joined.startswith(b"\n") and json.loads(joined)["seconds"] == 0.7


def test_a_failed_run_after_silence_still_ends_with_its_error(quick_keepalive, sdk_user):
    lines = raw_stream(quick_keepalive, sdk_user, "/runs/stream",
                       {"assistant_id": "nap", "input": {"seconds": 0.6, "fail": "sleep"}})
    assert ": heartbeat" in lines
    events = [line for line in lines if line.startswith("event: ")]
    assert events[-1] == "event: error"


def test_by_default_a_short_silence_sends_no_heartbeat(lg_url, sdk_user):
    lines = raw_stream(lg_url, sdk_user, "/runs/stream",
                       {"assistant_id": "nap", "input": {"seconds": 0.6}})
    assert ": heartbeat" not in lines  # 5 s by default


def test_events_mode_streams_langchains_astream_events_of_nodes_and_model_calls(sdk):
    """``stream_mode: "events"`` (Agent Inbox's): each node's on_chain_start/stream/end, each model
    call's on_chat_model_start/stream/end, in astream_events v2's shape."""
    given = {"goal": "Estimate the TAM of a budgeting app", "region": "Germany",
             "currency": "EUR"}  # no bootstrap questions: the model decides first
    parts = list(sdk.runs.stream(None, "acquisition", input=given, stream_mode="events"))
    events = [p.data for p in parts if p.event == "events"]
    assert {p.event for p in parts} == {"metadata", "events", "end"}
    names = [(e["event"], e["name"]) for e in events]
    assert names[:3] == [("on_chain_start", "tick"), ("on_chain_stream", "tick"),
                         ("on_chain_end", "tick")]
    started = next(e for e in events if e["event"] == "on_chain_start" and e["name"] == "decide")
    assert started["metadata"]["langgraph_node"] == "decide" and started["data"] == {
        "input": None}
    model = [e for e in events if e["event"].startswith("on_chat_model")]
    assert [e["event"] for e in model[:3]] == [
        "on_chat_model_start", "on_chat_model_stream", "on_chat_model_end"]
    assert model[0]["run_id"] == model[2]["run_id"] and started["run_id"] in (
        model[0]["parent_ids"])
    assert model[0]["data"]["input"]["messages"][0][0]["type"] in ("system", "human")
    assert model[1]["data"]["chunk"]["type"] == "AIMessageChunk"
    assert model[1]["data"]["chunk"]["content"] == model[2]["data"]["output"]["content"] != ""
    ended = next(e for e in events if e["event"] == "on_chain_end" and e["name"] == "decide")
    assert ended["data"]["output"]["decision_origin"] == "llm"
    streamed = next(e for e in events if e["event"] == "on_chain_stream" and e["name"] == (
        "decide"))  # its output as the node's chunk, before its end (Aegra's suite reads it)
    assert streamed["data"] == {"chunk": ended["data"]["output"]}
    assert streamed["run_id"] == ended["run_id"] == started["run_id"]


def test_a_stream_whose_client_disconnects_cancels_its_run_on_disconnect_cancel(
        lg_url, sdk_user):
    with httpx.stream("POST", f"{lg_url}/runs/stream", timeout=30,
                      headers={"x-api-key": api_token(sdk_user)},
                      json={"assistant_id": "slow", "input": {"limit": 40},
                            "stream_mode": ["updates"], "on_disconnect": "cancel",
                            # kept once it stops, to be read here (a stateless run's thread
                            # goes with its run by default)
                            "on_completion": "keep"}) as response:
        assert response.status_code == 200
        run_id = response.headers["content-location"].rsplit("/", 1)[-1]
        for line in response.iter_lines():
            if line.startswith("event: updates"):
                break  # one tick seen: the client goes away
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        run = Run.objects.get(id=run_id)
        if run.is_finished:
            break
        time.sleep(0.2)
    assert run.status == Run.Status.CANCELLED  # 40 ticks of 0.1 s would have succeeded
    assert run.events.filter(kind=RunEvent.Kind.NODE_FINISHED).count() < 40


def test_on_disconnect_takes_continue_or_cancel(lg_url, sdk_user):
    response = httpx.post(f"{lg_url}/runs/stream", timeout=30,
                          headers={"x-api-key": api_token(sdk_user)},
                          json={"assistant_id": "nap", "on_disconnect": "stop"})
    assert response.status_code == 422 and "on_disconnect" in response.text
