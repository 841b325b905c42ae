"""How a graph's result is shown: a result card, declared by the graph, never by the host.

A graph's :class:`~planner.registry.GraphSpec` names two functions: ``output_of`` picks the
run's output from its final state (what the run stores, the API returns and the
``run_succeeded`` event carries), and ``present_result`` turns that output into a
:class:`ResultCard` the pages render. Graphs that declare neither (a user's own graph)
get the generic forms below: the final state, shown as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ResultItem:
    """One line of a result card: a labelled value and where it came from."""

    label: str
    value: str
    """The value formatted for people (``"€18.8 bn"``, ``"12,000,000"``)."""
    source: str = ""
    """Where the value came from: ``"searched"``, ``"answered"``, ``"given"``, ``"computed"`` …"""
    detail: str = ""
    """A longer note shown on demand (the search hit, the question asked …)."""
    reference: str = ""
    """The source's title and address, shown beside the value (``"Japan: population 2024"``)."""
    warning: str = ""
    """Why the value deserves a second look (its source is about another topic), shown."""


@dataclass(frozen=True)
class ResultCard:
    """What a finished run produced, as its graph wants it shown."""

    headline: str
    """One line that says the result (``"TAM €18.8 bn"``, ``"Synthesis of 12 tasks"``)."""
    items: tuple[ResultItem, ...] = ()
    """The inputs the result came from, in reading order."""
    formula: str = ""
    """How the headline follows from the items, with their numbers
    (``"TAM = population x adoption x price = 84.5 million x 18% x 47.88 EUR"``, with
    multiplication signs)."""
    body: str = ""
    """Longer text (a synthesis), shown as wrapped plain text."""
    metrics: tuple[ResultItem, ...] = field(default=())
    """Figures about the run (tasks planned, rounds, errors …)."""


def default_output(values: Any) -> Any:
    """A run's output: the state's ``result`` channel if it has one, else the whole state."""
    if isinstance(values, Mapping) and "result" in values:
        return values["result"]
    return values


_ROLES = {"human": "user", "ai": "assistant", "AIMessageChunk": "assistant", "tool": "tool",
          "system": "system"}
"""LangChain message types (as a ``messages`` channel stores them) and who they are."""


def generic_result_card(output: Any) -> ResultCard:
    """The card of a graph that declares none: a chat state's conversation, message by
    message (the rest of its state below), or else its output as indented JSON."""
    messages = _messages(output)
    if not messages:
        return ResultCard(headline="Final state", body=_json(output))
    items = tuple(ResultItem(label=_ROLES.get(str(m.get("type")), str(m.get("type") or "?")),
                             value=_text(m.get("content"))) for m in messages)
    replies = [item.value for item in items if item.label == "assistant"]
    last = replies[-1] if replies else ""
    headline = f"Conversation of {len(items)} message{'s' if len(items) != 1 else ''}"
    if last:
        headline += f"; last reply: {last[:120]}{'…' if len(last) > 120 else ''}"
    rest = {k: v for k, v in output.items() if k != "messages"}
    return ResultCard(headline=headline, items=items, body=_json(rest) if rest else "")


def _messages(output: Any) -> list[Mapping[str, Any]]:
    """The messages of a state with a ``messages`` channel of LangChain messages, if any."""
    found = output.get("messages") if isinstance(output, Mapping) else None
    if not isinstance(found, list) or not found:
        return []
    if not all(isinstance(m, Mapping) and "content" in m and "type" in m for m in found):
        return []
    return found


def _text(content: Any) -> str:
    """A message's content as text (content blocks joined, other values as JSON)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(_block_text(block) for block in content).strip()
    return _json(content)


def _block_text(block: Any) -> str:
    """One content block: a string, a block's ``text`` (none for an image), else JSON."""
    if isinstance(block, str):
        return block
    if isinstance(block, Mapping):
        return str(block.get("text", ""))
    return _json(block)


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
