"""How a stream shapes the chunks of a model's answer (``PartMaker.token_parts``) and the
whole message its node returns: a message is sent chunk by chunk from its first chunk, or
whole at its node's end, never both (a client joins what carries one id into one message);
and an event counts as delivered when a part of it is sent, not when the stream's modes make
none of it."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from dashboard.lgserver.stream import PartMaker, _aevent_parts
from dashboard.models import Run, RunEvent
from dashboard.runs import instruments

RUN = Run(id=uuid.uuid4(), conversation_id=uuid.uuid4(), graph="talk")
META = {"langgraph_node": "talk", "langgraph_step": 1, "ls_model_name": "m"}


def chunks(message_id: str, pieces: list[str], *, first: int = 0, ns: str = ""
           ) -> list[dict[str, Any]]:
    """Token items as a run's TokenBell sends them, from chunk ``first`` on."""
    return [{"id": message_id, "i": i, "ns": ns,
             "chunk": {"type": "AIMessageChunk", "id": message_id, "content": piece},
             **({"meta": META} if i == 0 else {})}
            for i, piece in enumerate(pieces) if i >= first]


def node_end(*messages: dict[str, Any]) -> dict[str, Any]:
    """The event of the node that returned ``messages``."""
    return {"kind": RunEvent.Kind.NODE_FINISHED, "namespace": "", "node": "talk", "step": 1,
            "task_id": "t1", "seq": 9, "created_at": "2026-01-01T00:00:00+00:00",
            "payload": {"update": {"messages": list(messages)}}}


def whole(message_id: str, content: str) -> dict[str, Any]:
    return {"type": "ai", "id": message_id, "content": content}


def test_a_streamed_message_is_not_sent_again_whole_when_its_node_ends():
    maker = PartMaker(RUN, ["messages-tuple"], False, RUN.id)
    parts = maker.token_parts(chunks("m1", ["Hel", "lo"]))
    assert [(name, data[0]["content"]) for name, data in parts] == [
        ("messages", "Hel"), ("messages", "lo")]
    meta = parts[0][1][1]
    assert meta == {**META, "thread_id": str(RUN.conversation_id), "run_id": str(RUN.id)}
    assert parts[1][1][1] == meta  # beside every chunk
    assert maker.parts(node_end(whole("m1", "Hello"), whole("m2", "Also"))) == [
        ("messages", [whole("m2", "Also"), {
            "langgraph_node": "talk", "langgraph_step": 1, "langgraph_checkpoint_ns": "",
            "thread_id": str(RUN.conversation_id), "run_id": str(RUN.id)}])]


def test_a_message_joined_midway_comes_whole_and_its_late_chunks_never():
    maker = PartMaker(RUN, ["messages-tuple"], False, RUN.id)
    assert maker.token_parts(chunks("m1", ["Hel", "lo", " you"], first=1)) == []
    [(name, (message, _))] = maker.parts(node_end(whole("m1", "Hello you")))
    assert (name, message["content"]) == ("messages", "Hello you")
    assert maker.token_parts(chunks("m1", ["Hel"])) == []  # its first, late: sent already


def test_the_messages_mode_sends_metadata_once_then_the_message_so_far():
    maker = PartMaker(RUN, ["messages"], False, RUN.id)
    parts = maker.token_parts(chunks("m1", ["Hel", "lo", ""]))
    assert [name for name, _ in parts] == ["messages/metadata", *["messages/partial"] * 3]
    assert parts[0][1] == {"m1": {"metadata": {
        **META, "thread_id": str(RUN.conversation_id), "run_id": str(RUN.id)}}}
    so_far = [data[0] for _, data in parts[1:]]
    assert [(m["type"], m["id"], m["content"]) for m in so_far] == [
        ("AIMessageChunk", "m1", "Hel"), ("AIMessageChunk", "m1", "Hello"),
        ("AIMessageChunk", "m1", "Hello")]
    assert maker.parts(node_end(whole("m1", "Hello"))) == []
    # a message it never streamed: its metadata, then it complete
    assert [name for name, _ in maker.parts(node_end(whole("m2", "Bye")))] == [
        "messages/metadata", "messages/complete"]


def test_a_message_whose_id_changed_at_its_end_is_not_sent_twice():
    maker = PartMaker(RUN, ["messages-tuple"], False, RUN.id)
    maker.token_parts([*chunks("lc_run--1", ["Hi"]), {"id": "lc_run--1", "final": "msg_9"}])
    assert maker.parts(node_end(whole("msg_9", "Hi"))) == []


def test_a_subgraphs_chunks_only_with_subgraphs_and_under_its_namespace():
    items = chunks("m1", ["Hi"], ns="inner:abc")
    assert PartMaker(RUN, ["messages-tuple"], False, RUN.id).token_parts(items) == []
    [(name, _)] = PartMaker(RUN, ["messages-tuple"], True, RUN.id).token_parts(items)
    assert name == "messages|inner:abc"


def test_a_stream_of_other_modes_makes_no_parts_of_chunks():
    assert PartMaker(RUN, ["values", "updates"], False, RUN.id).token_parts(
        chunks("m1", ["Hi"])) == []


def model_finished(call: str, text: str) -> dict[str, Any]:
    """The event of a model call that ended with ``text``."""
    return {"kind": RunEvent.Kind.MODEL_FINISHED, "namespace": "", "node": "talk", "step": 1,
            "task_id": "t1", "seq": 8, "created_at": "2026-01-01T00:00:00+00:00",
            "payload": {"call_id": call, "model": "m", "output": {"text": text}}}


def test_a_hidden_call_s_chunks_go_to_events_streams_only_each_as_it_comes():
    items = chunks("m1", ["Hel", "lo"])
    items[0].update(call="c1", hidden=True)  # tagged nostream: a planner's own reasoning
    messages = PartMaker(RUN, ["messages-tuple", "messages"], False, RUN.id)
    assert messages.token_parts(items) == []
    events = PartMaker(RUN, ["events"], False, RUN.id)
    parts = events.token_parts(items)
    assert [(name, e["event"], e["run_id"], e["data"]["chunk"]["content"])
            for name, e in parts] == [("events", "on_chat_model_stream", "c1", "Hel"),
                                      ("events", "on_chat_model_stream", "c1", "lo")]
    assert parts[0][1]["metadata"]["langgraph_node"] == "talk"
    # its end is not sent again as one chunk with the whole answer
    assert [e["event"] for _, e in events.parts(model_finished("c1", "Hello"))] == [
        "on_chat_model_end"]
    assert [e["event"] for _, e in PartMaker(RUN, ["events"], False, RUN.id).parts(
        model_finished("c1", "Hello"))] == ["on_chat_model_stream", "on_chat_model_end"]


def delivered() -> float:
    """Events the delivery histogram has counted in this process so far."""
    return sum(sample.value for metric in instruments.EVENT_DELIVERY_SECONDS.collect()
               for sample in metric.samples if sample.name.endswith("_count"))


def test_an_event_counts_as_delivered_only_when_the_stream_sends_a_part_of_it():
    started = {**node_end(), "kind": RunEvent.Kind.NODE_STARTED, "seq": 8, "payload": {}}
    maker = PartMaker(RUN, ["updates"], False, RUN.id)  # a node's start makes no update part

    async def sent() -> list[tuple[bytes, int | None]]:
        return [item async for item in _aevent_parts(maker, [started, node_end()])]

    before = delivered()
    parts = asyncio.run(sent())
    assert [seq for _, seq in parts] == [9]  # the node's end, its update
    assert delivered() - before == 1
