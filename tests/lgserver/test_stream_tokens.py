"""A model's answer streams token by token in the ``messages`` and ``messages-tuple`` modes,
as LangGraph's server streams it, to the official ``langgraph-sdk``.

The graphs call ``ChatOpenAI`` on a loopback OpenAI-compatible server that streams its
answer in chunks of 8 characters, a pause between two: ``talk`` asks its model to stream,
``answer`` only invokes it (as most graphs do; LangChain streams it when a ``messages``
client listens, as under LangGraph's server). In-process here, on SQLite and the in-memory
layer; :func:`test_a_workers_run_streams_its_tokens_through_redis` runs the graph in a
procrastinate worker, its chunks on Redis (the PostgreSQL pass).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator

import pytest

from tests.conftest import SMALL_POOLS, api_token, served
from tests.openai_server import OpenAIServer

pytestmark = [pytest.mark.server, pytest.mark.django_db(transaction=True)]

GRAPHS_PY = '''
import os

from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic import SecretStr


def model(**kwargs):
    return ChatOpenAI(model="planwatch-test-model", api_key=SecretStr("test-key"),
                      base_url=os.environ["PLANWATCH_TEST_OPENAI_URL"], stream_usage=True,
                      max_retries=0, **kwargs)


async def talk(state: MessagesState) -> dict:  # its model streams, whoever listens
    return {"messages": [await model(streaming=True).ainvoke(state["messages"])]}


async def answer(state: MessagesState) -> dict:  # invoked: streamed for a messages client
    return {"messages": [await model().ainvoke(state["messages"])]}


def alone(node):
    graph = StateGraph(MessagesState)
    graph.add_node(node.__name__, node)
    graph.add_edge(START, node.__name__)
    graph.add_edge(node.__name__, END)
    return graph.compile()


talking = alone(talk)
answering = alone(answer)
'''

REPLY = "Tokens arrive one after another, as the model writes them down."  # 8 chunks
HI = {"messages": [{"type": "human", "content": "hi"}]}


@pytest.fixture(scope="module")
def model_server() -> Iterator[OpenAIServer]:
    """The loopback model: :data:`REPLY` in chunks of 8 characters, 0.1 s apart."""
    server = OpenAIServer().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def paced(model_server):
    """Each test's model writes :data:`REPLY` at its pace (a test may slow it down)."""
    model_server.reply, model_server.delay, model_server.chunk_delay = REPLY, 0.0, 0.1


def write_project(root) -> str:
    """A user's project with the two graphs; the path of its langgraph.json."""
    (root / "talking.py").write_text(GRAPHS_PY)
    config = root / "langgraph.json"
    config.write_text(json.dumps({"dependencies": ["."], "graphs": {
        "talk": "./talking.py:talking", "answer": "./talking.py:answering"}}))
    return str(config)


@pytest.fixture(scope="module")
def tokens_url(django_db_setup, django_db_blocker, tmp_path_factory, model_server
               ) -> Iterator[str]:
    """Planwatch serving the graphs, its LangGraph API's base URL."""
    config = write_project(tmp_path_factory.mktemp("talking"))
    with served(django_db_blocker, PLANWATCH_LANGGRAPH_CONFIG=config,
                PLANWATCH_TEST_OPENAI_URL=model_server.url, **SMALL_POOLS) as url:
        yield f"{url}/langgraph"


@pytest.fixture
def client(tokens_url, sdk_user):
    """The official sync client, as a user with every run permission."""
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=tokens_url, api_key=api_token(sdk_user))


def timed(parts) -> list[tuple[float, object]]:
    """Each part with the moment it arrived."""
    return [(time.monotonic(), part) for part in parts]


def last_message(parts) -> dict:
    """The last message of the state the stream's last ``values`` part showed."""
    return [p.data for p in parts if p.event == "values"][-1]["messages"][-1]


def test_messages_tuple_streams_the_answer_chunk_by_chunk_as_the_model_writes_it(client):
    tid = client.threads.create()["thread_id"]
    arrived = timed(client.runs.stream(tid, "talk", input=HI,
                                       stream_mode=["messages-tuple", "values"]))
    parts = [p for _, p in arrived]
    run_id = parts[0].data["run_id"]
    chunks = [(at, p.data) for at, p in arrived if p.event == "messages"]
    assert len(chunks) >= 8  # one part a chunk (and LangChain's closing empty ones)
    assert {c[0]["type"] for _, c in chunks} == {"AIMessageChunk"}  # never sent again whole
    final = last_message(parts)
    assert "".join(c[0]["content"] for _, c in chunks) == final["content"] == REPLY
    assert {c[0]["id"] for _, c in chunks} == {final["id"]}  # one message for the client
    # as the model wrote them: the first long before the last (0.1 s a chunk)
    assert chunks[-1][0] - chunks[0][0] > 0.4
    meta = chunks[0][1][1]
    assert (meta["langgraph_node"], meta["thread_id"], meta["run_id"]) == ("talk", tid, run_id)
    assert meta["ls_model_name"] == "planwatch-test-model"


def test_messages_mode_sends_the_message_so_far_with_each_chunk(client):
    tid = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(tid, "talk", input=HI, stream_mode=["messages", "values"]))
    events = [p.event for p in parts if p.event.startswith("messages")]
    assert events[0] == "messages/metadata" and "messages/complete" not in events
    so_far = [p.data[0] for p in parts if p.event == "messages/partial"]
    texts = [m["content"] for m in so_far]
    assert len(set(texts)) == 8 and texts[-1] == REPLY
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))
    final = last_message(parts)
    [metadata] = [p.data for p in parts if p.event == "messages/metadata"]
    assert set(metadata) == {m["id"] for m in so_far} == {final["id"]}
    assert metadata[final["id"]]["metadata"]["langgraph_node"] == "talk"


def test_a_model_the_graph_invokes_streams_only_to_a_client_of_messages(client, model_server):
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "answer", input=HI)
    assert not model_server.requests[-1].get("stream")  # nobody streams its messages
    parts = list(client.runs.stream(tid, "answer", input=HI,
                                    stream_mode=["messages-tuple", "values"]))
    assert model_server.requests[-1].get("stream") is True
    chunks = [p.data[0] for p in parts if p.event == "messages"]
    assert len(chunks) >= 8 and "".join(c["content"] for c in chunks) == REPLY
    assert {c["id"] for c in chunks} == {last_message(parts)["id"]}


def test_a_run_cancelled_after_its_third_part_is_interrupted(client, model_server):
    """Aegra's e2e test_cancel_stops_event_stream: the third part is the answer's first
    chunk, so the run is still answering when it is cancelled."""
    model_server.chunk_delay = 0.3  # 2 s of answer
    tid = client.threads.create()["thread_id"]
    seen = []
    for part in client.runs.stream(tid, "answer", input=HI, stream_mode=["messages", "values"]):
        seen.append(part)
        if len(seen) == 3:
            break
    assert [p.event for p in seen] == ["metadata", "values", "messages/metadata"]
    run_id = seen[0].data["run_id"]
    client.runs.cancel(tid, run_id)
    deadline = time.monotonic() + 15
    while (status := client.runs.get(tid, run_id)["status"]) in ("pending", "running"):
        assert time.monotonic() < deadline, "the run was not cancelled"
        time.sleep(0.1)
    assert status == "interrupted"


def test_a_stream_joined_while_the_model_writes_gets_its_chunks_and_a_replay_whole_messages(
        client, model_server):
    model_server.delay = 1.0  # time to join before the first chunk
    tid = client.threads.create()["thread_id"]
    run = client.runs.create(tid, "talk", input=HI, stream_mode=["messages-tuple"])
    joined = list(client.runs.join_stream(tid, run["run_id"], stream_mode="messages-tuple"))
    chunks = [p.data[0] for p in joined if p.event == "messages"]
    assert len(chunks) >= 8 and {c["type"] for c in chunks} == {"AIMessageChunk"}
    assert "".join(c["content"] for c in chunks) == REPLY
    # the same run replayed from its start: no chunks (never written), the message whole
    replayed = [p.data for p in client.runs.join_stream(
        tid, run["run_id"], stream_mode="messages-tuple", last_event_id="0")
        if p.event == "messages"]
    [(message, meta)] = replayed
    assert (message["type"], message["content"]) == ("ai", REPLY)
    assert message["id"] == chunks[0]["id"] and meta["langgraph_node"] == "talk"


def test_a_stream_of_other_modes_gets_no_chunks(client):
    tid = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(tid, "talk", input=HI, stream_mode=["updates", "values"]))
    assert {p.event for p in parts} == {"metadata", "updates", "values", "end"}
    assert last_message(parts)["content"] == REPLY


def test_events_mode_streams_the_answer_chunk_by_chunk_as_the_model_writes_it(
        client, model_server):
    """``astream_events`` on LangGraph's server: an ``on_chat_model_stream`` event a chunk
    (33 chunks from 0.96 s there), not the whole answer as one chunk at the end."""
    tid = client.threads.create()["thread_id"]
    arrived = timed(client.runs.stream(tid, "answer", input=HI, stream_mode="events"))
    assert model_server.requests[-1].get("stream") is True  # an events client listens
    events = [(at, p.data) for at, p in arrived if p.event == "events"]
    names = [e["event"] for _, e in events]
    start, end = names.index("on_chat_model_start"), names.index("on_chat_model_end")
    chunks = [(at, e) for at, e in events if e["event"] == "on_chat_model_stream"]
    assert len(chunks) >= 8 and start < names.index("on_chat_model_stream") < end
    assert "".join(e["data"]["chunk"]["content"] for _, e in chunks) == REPLY
    call = events[start][1]["run_id"]
    assert {e["run_id"] for _, e in chunks} == {call} == {events[end][1]["run_id"]}
    assert chunks[0][1]["metadata"]["langgraph_node"] == "answer"
    # as the model wrote them: the first long before the last (0.1 s a chunk)
    assert chunks[-1][0] - chunks[0][0] > 0.4


@pytest.mark.postgres
@pytest.mark.redis
def test_a_workers_run_streams_its_tokens_through_redis(django_db_blocker, tmp_path, redis_url,
                                                        model_server, sdk_user):
    """The graph runs in a procrastinate worker, the stream in daphne: the chunks cross
    from one process to the other on Redis, as the doorbells do."""
    from django.db import connection
    from langgraph_sdk import get_sync_client

    from dashboard.models import Run
    from tests.support.processes import kill, spawn

    if connection.vendor != "postgresql":
        pytest.skip("procrastinate needs PostgreSQL: this runs in make test's PostgreSQL pass")
    env = {"PLANWATCH_LANGGRAPH_CONFIG": write_project(tmp_path), "REDIS_URL": redis_url,
           "PLANWATCH_TEST_OPENAI_URL": model_server.url, "PLANWATCH_EXECUTOR": "procrastinate"}
    worker = spawn(["planwatch_worker"], "worker-tokens", **env)
    try:
        with served(django_db_blocker, **env, **SMALL_POOLS) as url:
            client = get_sync_client(url=f"{url}/langgraph", api_key=api_token(sdk_user))
            tid = client.threads.create()["thread_id"]
            parts = list(client.runs.stream(tid, "answer", input=HI,
                                            stream_mode=["messages-tuple", "values"]))
        chunks = [p.data[0] for p in parts if p.event == "messages"]
        assert len(chunks) >= 8 and {c["type"] for c in chunks} == {"AIMessageChunk"}
        final = last_message(parts)
        assert "".join(c["content"] for c in chunks) == final["content"] == REPLY
        assert {c["id"] for c in chunks} == {final["id"]}
        owner = Run.objects.get(conversation_id=tid).events.first().payload["owner"]
        assert f":{worker.pid}:" in owner  # the worker ran it, not daphne
    finally:
        kill(worker)
