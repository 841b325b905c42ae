"""A planner's chat transcript: the ``messages`` channel chat clients read, as plain JSON.

Agent Chat UI (and any client that reads ``values.messages``) shows a graph's state as a
conversation. The built-in planners keep one beside their own channels: the operator's
goal as the human message, each question as an AI message, each answer as a human
message, the result as the last AI message. The channel is merged by LangGraph's
``add_messages`` (ids, replacement, removal as LangGraph does them) and stored as the
messages' JSON (what ``model_dump`` gives and LangGraph's server sends), so the planners'
state stays plain JSON. Every message has an id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, cast
from uuid import uuid4

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, convert_to_messages
from langgraph.graph.message import add_messages

from planner.spec import InputError

MAX_SENT_MESSAGES = 200
"""Messages a run may start with (a chat client sends its new ones, not the history)."""


def add_message_json(left: Any, right: Any) -> list[dict[str, Any]]:
    """``add_messages(left, right)`` with the result as JSON dicts (the channel's reducer)."""
    merged = add_messages(left or [], right or [])
    # add_messages returns messages for message input (its annotation allows any input)
    return [message.model_dump() for message in cast(list[BaseMessage], merged)]


ChatMessages = Annotated[list[dict[str, Any]], add_message_json]
"""The type of a planner's ``messages`` channel."""


def new_id() -> str:
    """A message id (LangGraph's server and LangChain give UUIDs)."""
    return str(uuid4())


def human(text: str) -> dict[str, Any]:
    """A human message with an id, as JSON."""
    return HumanMessage(content=text, id=new_id()).model_dump()


def ai(text: str) -> dict[str, Any]:
    """An AI message with an id, as JSON."""
    return AIMessage(content=text, id=new_id()).model_dump()


def ending_text(said: str, reason: str | None) -> str:
    """The chat's last words on a run that did not reach its goal: what happened, then why,
    as one sentence (``The plan failed: task t2 failed.``). Every such message is worded
    here: a failed plan's (its graph's last message), a failed run's and a budget's stop
    (``dashboard.runs.outcome.outcome_message``, where no node is left to say it)."""
    return f"{said}: {(reason or 'no reason was given').strip().rstrip('.')}."


def split_messages(values: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """``values`` without ``messages``, and the messages a chat client sent (None if none)."""
    rest = {k: v for k, v in values.items() if k != "messages"}
    return rest, values.get("messages")


def opening_messages(sent: Any, goal: str) -> list[dict[str, Any]]:
    """The transcript a run starts with: a chat client's messages as it sent them (each
    given an id if it had none), else the goal as one human message. ``InputError`` names
    messages LangChain cannot read."""
    if sent is None:
        return [human(goal)]
    items = sent if isinstance(sent, list) else [sent]
    if len(items) > MAX_SENT_MESSAGES:
        raise InputError({"messages": f"{len(items)} messages sent; send at most "
                                      f"{MAX_SENT_MESSAGES} (the new ones)"})
    try:
        messages = convert_to_messages(items)
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise InputError({"messages": (
            f"not a list of chat messages ({exc}); send messages such as "
            '{"type": "human", "content": "…"}')}) from None
    for message in messages:
        message.id = message.id or new_id()
    return [message.model_dump() for message in messages]
