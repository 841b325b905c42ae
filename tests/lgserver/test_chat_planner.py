"""A planner in a chat client (Agent Chat UI's requests, made by the official
``langgraph-sdk``): its internal model calls (the plan's tries, the synthesis) are tagged
``nostream``, so the ``messages`` stream carries only what the user reads; the chat's last
message is the plan's outcome (a failed plan: that it failed, and why).

The decomposition planner runs on a real LangChain model (``ChatOpenAI``) against the
loopback OpenAI-compatible server, which answers every plan with prose, never a plan: each
try fails to parse, the plan fails after three, and the synthesis says what it can.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dashboard.models import Run
from tests.conftest import SMALL_POOLS, api_token, served
from tests.openai_server import OpenAIServer

pytestmark = [pytest.mark.server, pytest.mark.django_db(transaction=True)]

REPLY = "Here is my reasoning about the plan, which is not a plan at all."


@pytest.fixture(scope="module")
def model_server() -> Iterator[OpenAIServer]:
    """The loopback model: :data:`REPLY` to every text call, in chunks of 8 characters."""
    server = OpenAIServer().start()
    server.reply = REPLY
    yield server
    server.stop()


@pytest.fixture(scope="module")
def chat_url(django_db_setup, django_db_blocker, model_server) -> Iterator[str]:
    """Planwatch with its planners on the loopback model; its LangGraph API's base URL."""
    with served(django_db_blocker, PLANWATCH_LLM="tests.openai_server:listened_model",
                PLANWATCH_TEST_OPENAI_URL=model_server.url, **SMALL_POOLS) as url:
        yield f"{url}/langgraph"


def test_a_planner_streams_only_its_transcript_and_ends_with_its_outcome(
        chat_url, sdk_user, model_server):
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=chat_url, api_key=api_token(sdk_user))
    tid = client.threads.create()["thread_id"]
    asked = len(model_server.requests)
    parts = list(client.runs.stream(
        tid, "decomposition", stream_mode=["messages-tuple", "values"],
        input={"messages": [{"type": "human", "content": "Plan a week in Porto"}]}))
    streamed_requests = [r for r in model_server.requests[asked:] if r.get("stream")]
    assert len(model_server.requests) - asked >= 3  # the plan's tries, the synthesis...
    assert streamed_requests  # ...streamed by the model, as a messages client makes it

    # no chunk of a model call reached the chat: the messages parts are the transcript's
    chunks = [p.data[0] for p in parts if p.event == "messages"]
    assert all(c["type"] != "AIMessageChunk" for c in chunks), chunks
    assert not any(REPLY[:8] in str(c.get("content")) for c in chunks[:-1]), chunks
    final = [p.data for p in parts if p.event == "values"][-1]["messages"][-1]
    assert final["type"] == "ai" and final["content"].startswith("The plan failed: "), final
    assert "planning failed after 3 tries" in final["content"]
    assert chunks and chunks[-1]["id"] == final["id"]  # sent whole when its node ended

    run = Run.objects.get(conversation_id=tid)
    assert (run.status, run.outcome) == (Run.Status.SUCCEEDED, Run.Outcome.PLAN_FAILED)
    assert run.outcome_reason in final["content"]
    thread = client.threads.get(tid)
    assert thread["status"] == "error"
    assert thread["metadata"]["planwatch_outcome"] == {"outcome": "plan_failed",
                                                       "reason": run.outcome_reason}
    (lg_run,) = client.runs.list(tid)
    assert lg_run["status"] == "success"  # the graph returned; its stream ended with end
