"""A run's log as LangChain's ``astream_events`` (v2) events: the ``events`` stream mode.

LangGraph's server streams ``astream_events(version="v2")`` for ``stream_mode: "events"``
(Agent Inbox asks for it to show progress). The log holds what those events say: each
node's task started and finished (``on_chain_start``, ``on_chain_stream`` with the node's
update as its chunk, ``on_chain_end`` with it as its output; the task's id as the event's
``run_id``) and each model call the run's
callback handler recorded (``on_chat_model_start``, then its answer as one
``on_chat_model_stream`` chunk and ``on_chat_model_end``; ``on_llm_*`` for a completion
model). Planwatch records a call's answer whole, not token by token, so one chunk carries
it; a node's input is not recorded, so its start carries none.
"""

from __future__ import annotations

from typing import Any

from dashboard.models import RunEvent

Kind = RunEvent.Kind


def _metadata(event: dict[str, Any], thread_id: str, run_id: str) -> dict[str, Any]:
    """The metadata LangGraph gives a task's events."""
    return {"langgraph_node": event["node"], "langgraph_step": event["step"],
            "langgraph_checkpoint_ns": event["namespace"], "langgraph_triggers": [],
            "thread_id": thread_id, "run_id": run_id}


def _shaped(name: str, kind: str, event: dict[str, Any], run_id: str, thread_id: str,
            data: dict[str, Any], ran: str, *, parents: list[str], **extra: Any
            ) -> dict[str, Any]:
    step = event["step"]
    return {"event": name, "name": kind, "run_id": ran, "parent_ids": parents,
            "tags": [f"graph:step:{step}"] if step is not None else [],
            "metadata": {**_metadata(event, thread_id, run_id), **extra}, "data": data}


def _message(role: Any, text: Any) -> dict[str, Any]:
    """A recorded message (``{role, content}``) as LangChain's message JSON."""
    return {"type": str(role or "human"), "content": text if text is not None else ""}


def stream_events(event: dict[str, Any], *, run_id: str, thread_id: str
                  ) -> list[dict[str, Any]]:
    """The ``astream_events`` v2 events one log event stands for (none for most kinds)."""
    kind, payload = event["kind"], event["payload"] or {}
    task = event["task_id"] or f"{run_id}-{event['seq']}"
    if kind == Kind.NODE_STARTED:
        return [_shaped("on_chain_start", event["node"], event, run_id, thread_id,
                        {"input": None}, task, parents=[run_id])]
    if kind == Kind.NODE_FINISHED:  # its output streamed (as a runnable's last chunk), then
        update = payload.get("update")
        return [_shaped("on_chain_stream", event["node"], event, run_id, thread_id,
                        {"chunk": update}, task, parents=[run_id]),
                _shaped("on_chain_end", event["node"], event, run_id, thread_id,
                        {"output": update, "input": None}, task, parents=[run_id])]
    if kind not in (Kind.MODEL_STARTED, Kind.MODEL_FINISHED):
        return []
    call = str(payload.get("call_id") or task)
    name = str(payload.get("model") or "model")
    family = "chat_model" if payload.get("kind", "chat") == "chat" else "llm"
    extra = {"ls_model_name": payload.get("model"), "ls_provider": payload.get("provider")}
    parents = [run_id, task] if event["task_id"] else [run_id]
    if kind == Kind.MODEL_STARTED:
        messages = [_message(m.get("role"), m.get("content"))
                    for m in payload.get("messages") or () if isinstance(m, dict)]
        return [_shaped(f"on_{family}_start", name, event, run_id, thread_id,
                        {"input": {"messages": [messages]}}, call, parents=parents, **extra)]
    output = payload.get("output") or {}
    text = str(output.get("text") or "")
    answer = {"type": "ai", "content": text, "id": f"run-{call}",
              "tool_calls": output.get("tool_calls") or [],
              "usage_metadata": payload.get("usage")}
    out = []
    if text:
        chunk = {**answer, "type": "AIMessageChunk"}
        out.append(_shaped(f"on_{family}_stream", name, event, run_id, thread_id,
                           {"chunk": chunk}, call, parents=parents, **extra))
    out.append(_shaped(f"on_{family}_end", name, event, run_id, thread_id,
                       {"output": answer, "input": None}, call, parents=parents, **extra))
    return out
