"""Make graph values storable as JSON, whatever a user's graph puts in its state."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import uuid
from collections.abc import Mapping
from typing import Any


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
