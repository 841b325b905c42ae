"""What a LangGraph request may not carry: LangGraph's own keys, a recursion limit out of range.

Numbers beyond 64 bits (and every other unstorable value) are refused by the one JSON
parser, :mod:`dashboard.api.parsers`.
"""

from __future__ import annotations

from typing import Any

from dashboard.thread_runs import (  # noqa: F401  (the rule lives with run requests)
    RESERVED_CONFIGURABLE,
    reserved_config,
    reserved_keys,
)

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
