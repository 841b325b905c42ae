"""What a LangGraph request may not carry: LangGraph's own keys, a recursion limit out of range.

Numbers beyond 64 bits (and every other unstorable value) are refused by the one JSON
parser, :mod:`dashboard.api.parsers`.
"""

from __future__ import annotations

from typing import Any

RESERVED_CONFIGURABLE = frozenset({
    "thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map", "checkpoint_during",
    "checkpointer", "run_id", "langgraph_step", "langgraph_node", "langgraph_triggers",
    "langgraph_path", "langgraph_checkpoint_ns", "task_id",
})
"""Keys of ``config.configurable`` that LangGraph (or Planwatch) sets for a run."""


def reserved_keys(configurable: dict[str, Any]) -> list[str]:
    """The keys of ``configurable`` a client may not set (LangGraph's ``__pregel_*`` and
    other internal keys, and the checkpoint's own), sorted."""
    return sorted(str(k) for k in configurable
                  if k in RESERVED_CONFIGURABLE or str(k).startswith("__"))


RECURSION_LIMIT_MAX = 2**31 - 1
"""The largest recursion limit a run stores (its column is a 32-bit integer)."""


def recursion_limit(value: Any) -> str:
    """Why ``value`` cannot be a run's ``config.recursion_limit`` ("" if it can): a whole
    number from 1 to 2**31 - 1.

    A client's own limit is taken as LangGraph's server takes it (the official SDK's
    benchmark client asks for 10,000); a runaway run is bounded by its client's limit,
    by cancelling, and by ``PLANWATCH_RECURSION_LIMIT`` when it asks for none."""
    if isinstance(value, bool) or not isinstance(value, int) or not \
            1 <= value <= RECURSION_LIMIT_MAX:
        return (f"{value!r} is not a whole number from 1 to {RECURSION_LIMIT_MAX}; "
                "leave it out for this server's default (PLANWATCH_RECURSION_LIMIT)")
    return ""
