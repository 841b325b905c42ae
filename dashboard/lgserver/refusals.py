"""What a LangGraph request may not carry: numbers beyond 64 bits, LangGraph's own keys."""

from __future__ import annotations

from typing import Any

from dashboard.thread_runs import (  # noqa: F401  (the rule lives with run requests)
    RESERVED_CONFIGURABLE,
    reserved_config,
    reserved_keys,
)

INT64 = (-(2**63), 2**63 - 1)
"""The integers a checkpoint (msgpack) and a JSON column can hold."""


def oversized_int(value: Any) -> str:
    """Where in ``value`` an integer beyond 64 bits is ("" if none), without recursion."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, int) and not INT64[0] <= item <= INT64[1]:
            return where or "body"
        if isinstance(item, dict):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(item))
    return ""


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
