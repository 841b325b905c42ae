"""A model call tagged ``nostream`` or ``langsmith:nostream`` (as the LLM port tags every
call of the planners) is recorded, and its chunks are told to the run's watchers hidden:
for ``events`` streams only, never as messages."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_core.outputs import ChatGenerationChunk

from dashboard.runs.modelcalls import ContentPolicy, StreamingModelCallRecorder
from dashboard.runs.record import TaskClock
from planner.llm import INTERNAL_TAGS, purpose_config

META = {"langgraph_node": "plan", "langgraph_step": 2, "langgraph_checkpoint_ns": "plan:t1",
        "langgraph_task_id": "t1"}


class Writer:
    """The part of an event writer the recorder uses: events kept in a list."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.next_seq = 1
        self.clock = TaskClock()

    def add(self, fields: dict[str, Any]) -> None:
        self.rows.append(fields)
        self.next_seq += 1

    def flush_behind(self) -> None:
        pass


def told(tags: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The chunks a call with ``tags`` told the run's watchers, and the events recorded."""
    tokens = SimpleNamespace(items=[])
    tokens.add = lambda item, *, after: tokens.items.append(item)

    async def call() -> Writer:
        writer = Writer()
        recorder = StreamingModelCallRecorder(
            writer, prices={}, policy=ContentPolicy(), loop=asyncio.get_running_loop(),
            tokens=tokens)  # type: ignore[arg-type]
        run_id = uuid.uuid4()
        await recorder.on_chat_model_start({}, [[HumanMessage("plan it")]], run_id=run_id,
                                           tags=tags, metadata=dict(META))
        for piece in ("a plan ", "in two"):
            await recorder.on_llm_new_token(piece, run_id=run_id, chunk=ChatGenerationChunk(
                message=AIMessageChunk(content=piece)))
        return writer

    writer = asyncio.run(call())
    return tokens.items, [row["kind"] for row in writer.rows]


@pytest.mark.parametrize("tags", [["nostream"], ["langsmith:nostream"], list(INTERNAL_TAGS)])
def test_a_call_tagged_nostream_is_recorded_and_its_chunks_hidden(tags):
    items, kinds = told(tags)
    assert kinds == ["model_started"]
    assert [i["chunk"]["content"] for i in items] == ["a plan ", "in two"]
    assert items[0]["hidden"] is True  # the first carries the call's facts


def test_an_untagged_call_streams_its_chunks():
    items, _ = told(["seq:step:2"])
    assert [i["chunk"]["content"] for i in items] == ["a plan ", "in two"]
    assert "hidden" not in items[0] and items[0]["call"]


def test_the_llm_port_tags_every_call_internal():
    assert set(purpose_config("decomposition.plan")["tags"]) == {"nostream",
                                                                 "langsmith:nostream"}
