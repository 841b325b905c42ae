"""Queries asked again and again of another row: their SQL compiled by the ORM once.

Compiling a queryset (filters, ``Exists``, ``OuterRef``, annotations) costs more CPU than
running it on an indexed column: asked on every run's stop, or on every run request, the
compiling was most of what the question cost. :func:`compiled_once` compiles a queryset
once per database vendor, with a stand-in id, and gives its SQL with the real id in the
stand-in's places.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any
from uuid import UUID

from django.db import connection, models
from django.db.models import QuerySet

STAND_IN = UUID("5ee5c0de-0000-4000-8000-c0391ed0c0de")
"""The id a query is compiled with: no row has it, and no query's constant is it."""

_UUID = models.UUIDField()


def compiled_once(build: Callable[[UUID], QuerySet[Any, Any]]
                  ) -> Callable[[UUID | str], tuple[str, list[Any]]]:
    """``build``, a queryset of one id, as a function of that id that gives its SQL and
    parameters (for ``cursor.execute`` or ``Model.objects.raw``): compiled on the first
    call for each database vendor, the id put in its places on every call. Every other
    parameter is fixed when it is compiled: only for queries whose other values are
    constants (states, kinds), never a time or a caller's value."""

    @functools.cache
    def compiled(vendor: str) -> tuple[str, tuple[Any, ...], tuple[int, ...]]:
        sql, params = build(STAND_IN).query.sql_with_params()
        stand_in = _UUID.get_db_prep_value(STAND_IN, connection)
        places = tuple(i for i, param in enumerate(params) if param in (STAND_IN, stand_in))
        assert places, f"{build.__qualname__}'s query does not take its id: {params!r}"
        return str(sql), tuple(params), places

    @functools.wraps(build)
    def bound(pk: UUID | str) -> tuple[str, list[Any]]:
        sql, params, places = compiled(connection.vendor)
        value = _UUID.get_db_prep_value(pk, connection)
        bound_params = list(params)
        for place in places:
            bound_params[place] = value
        return sql, bound_params

    return bound
