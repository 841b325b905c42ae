"""The one JSON parser of every request body, ``/api/`` and ``/langgraph/`` alike.

A body is read by DRF's ``JSONParser`` (strict: ``NaN`` and ``Infinity`` are refused),
then every number in it is bounded before any view sees it: one a JSON column, a
checkpoint (msgpack) or the JSON renderer cannot hold (``1e400`` is read as infinity; an
integer past 64 bits) is a ``ValidationError`` naming where it is (``metadata.x``,
``input.items[2]``). What each field may be beyond that (its type, range and length) is
declared by its endpoint's serializer. Characters no database stores (NUL, lone
surrogates) and nesting deeper than ``MAX_JSON_DEPTH`` were refused before, by
:class:`dashboard.web.middleware.CraftedInputMiddleware`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from rest_framework import exceptions
from rest_framework.parsers import JSONParser

from dashboard.runs.jsonsafe import INT64


def _value_problem(item: Any) -> str:
    if isinstance(item, bool) or item is None:
        return ""
    if isinstance(item, float) and not math.isfinite(item):
        return ("is a number too large for a 64-bit float (read as infinity); send a "
                "finite number, or a string")
    if isinstance(item, int) and not INT64[0] <= item <= INT64[1]:
        return ("holds an integer beyond 64 bits, which checkpoints cannot store; "
                "send it as a string")
    return ""


def json_problem(value: Any) -> tuple[str, str] | None:
    """Where in ``value`` a number nothing downstream can hold is, and why (None if
    nowhere), without recursion: a non-finite float or an integer beyond 64 bits."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend((f"{where}.{key}" if where else str(key), child)
                         for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", child) for i, child in enumerate(item))
        elif why := _value_problem(item):
            return where or "body", why
    return None


def loads_bounded(text: str, *, name: str) -> Any:
    """``text`` parsed as a form's JSON field ``name``, bounded as a body is: ``ValueError``
    naming where a number nothing downstream can hold is (``NaN``, ``Infinity``, ``1e400``
    read as infinity, an integer past 64 bits), or if it is not JSON."""
    def no_constant(constant: str) -> Any:
        raise ValueError(f"{name} holds {constant}, which is not a JSON number; send a "
                         "finite number, or a string")

    value = json.loads(text, parse_constant=no_constant)
    found = json_problem(value)
    if found is not None:
        where, why = found
        where = name if where == "body" else f"{name}.{where}"
        raise ValueError(f"{where} {why}")
    return value


def check_json(value: Any) -> Any:
    """``value``, or a ``ValidationError`` naming the first unstorable part of it."""
    found = json_problem(value)
    if found is not None:
        where, why = found
        raise exceptions.ValidationError({where: f"{where} {why}"})
    return value


class BoundedJSONParser(JSONParser):
    """DRF's strict ``JSONParser``, then :func:`check_json` over what it read."""

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        """The body's JSON, bounded (``ValidationError`` naming the bad part)."""
        return check_json(super().parse(stream, media_type, parser_context))
