"""Make graph values storable as JSON, whatever a user's graph puts in its state."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import orjson

_AS_JSON_DUMPS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
"""Dates and dataclasses go to ``default`` (or are refused), as the standard library's
``json.dumps`` takes them. Subclasses of str, int, dict and list are written as their
base, as both libraries write them: a run event's kind is one (a ``TextChoices``), and
passing them through sent every doorbell and every write of rows to the standard
library's encoder (stop 58)."""


def dumpb(value: Any, *, default: Callable[[Any], Any] | None = None) -> bytes:
    """``value`` as JSON (UTF-8 bytes, compact): orjson's, a tenth of the CPU of the
    standard library's on the hot paths (a doorbell's events, a write's rows, an SSE
    part); the standard library's for what orjson refuses (an integer past 64 bits, a key
    that is not a string) so that whatever ``json.dumps`` took is still taken."""
    try:
        return orjson.dumps(value, default=default, option=_AS_JSON_DUMPS)
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False, default=default).encode()


def dumps(value: Any, *, default: Callable[[Any], Any] | None = None) -> str:
    """:func:`dumpb`, as text."""
    return dumpb(value, default=default).decode()


def loads(text: str | bytes) -> Any:
    """JSON ``text`` as Python values (orjson: a third of the standard library's CPU)."""
    return orjson.loads(text)


def to_jsonable(value: Any, *, _depth: int = 0) -> Any:
    """Return ``value`` as plain JSON data; unknown objects become their ``repr``."""
    if _depth > 50:
        return repr(value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    d = _depth + 1
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, _depth=d) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v, _depth=d) for v in value]
    if hasattr(value, "model_dump"):  # pydantic models, LangChain messages
        return to_jsonable(value.model_dump(), _depth=d)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value), _depth=d)
    if isinstance(value, datetime.datetime | datetime.date | uuid.UUID | decimal.Decimal):
        return str(value)
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value, _depth=d)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return repr(value)


INT64 = (-(2**63), 2**63 - 1)
"""The integers a checkpoint (msgpack) can hold."""


def from_column(value: Any, *, _depth: int = 0) -> Any:
    """``value`` read back from a JSON column as it was written, for a graph's state: an
    integer beyond 64 bits is a float again. PostgreSQL's ``jsonb`` keeps a number as a
    decimal and gives a float past 2**63 back in digits (``1e300`` as 301 of them), which
    Python reads as an integer that no checkpoint stores (the run failed at its next
    write, where SQLite's text gave the float back); no client sends one (the door
    refuses an integer beyond 64 bits), so such an integer was a float."""
    if isinstance(value, int) and not isinstance(value, bool) \
            and not INT64[0] <= value <= INT64[1]:
        try:
            return float(value)
        except OverflowError:  # past any float: the checkpoint write says so
            return value
    if _depth > 100:  # deeper than the door lets a body be
        return value
    d = _depth + 1
    if isinstance(value, dict):
        return {k: from_column(v, _depth=d) for k, v in value.items()}
    if isinstance(value, list):
        return [from_column(v, _depth=d) for v in value]
    return value
