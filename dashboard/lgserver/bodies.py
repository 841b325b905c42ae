"""The declared shapes of ``/langgraph/`` request bodies, as DRF serializers.

Every body has already passed the one JSON parser (:mod:`dashboard.api.parsers`): no
non-finite number, no integer past 64 bits, no NUL, nothing nested too deep. A shape here
declares what its endpoint's fields may be beyond that (type, range, and a column's
``max_length``), so a bad field is a 422 naming it before anything reaches the database.
Fields a shape does not declare pass as sent, to the view's own checks.
"""

from __future__ import annotations

import re
from datetime import UTC
from typing import Any

from django.core.validators import MaxLengthValidator, ProhibitNullCharactersValidator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from dashboard.models import Assistant, Cron, Thread

GRAPH_ID_MAX: int = Thread._meta.get_field("graph").max_length  # type: ignore[union-attr,assignment]
"""How long a thread's ``graph_id`` metadata may be (its ``graph`` column)."""

NAME_MAX = Assistant._meta.get_field("name").max_length  # type: ignore[union-attr]
SCHEDULE_MAX = Cron._meta.get_field("schedule").max_length  # type: ignore[union-attr]

VERSION_MAX = 2**31 - 1
"""The largest assistant version (its column is a 32-bit integer)."""

TTL_MIN_MINUTES = 1 / 60
"""The shortest store ``ttl``: one second (in minutes, as LangGraph's API counts it)."""
TTL_MAX_MINUTES = 100 * 366 * 24 * 60
"""The longest store ``ttl``: about a hundred years; leave it out to keep an item forever."""

STORE_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
"""The comparisons of a store search ``filter`` (LangGraph's ``BaseStore.search``)."""
FILTER_KEY = re.compile(r"^[A-Za-z0-9_.-]+$")
"""A store filter key, as LangGraph's SQLite store takes it (on every database alike)."""


@extend_schema_field(OpenApiTypes.OBJECT)
class JSONObjectField(serializers.JSONField):
    """A JSON object (``{}`` or more); null when ``allow_null``."""

    # DRF formats its messages: braces doubled
    default_error_messages = {"not_object": 'send a JSON object such as {{"key": "value"}}'}

    def to_internal_value(self, data: Any) -> Any:
        """The object as sent; refused unless it is one."""
        if not isinstance(data, dict):
            self.fail("not_object")
        return super().to_internal_value(data)


def _object(**kwargs: Any) -> JSONObjectField:
    return JSONObjectField(required=False, allow_null=True, **kwargs)


def _any(**kwargs: Any) -> serializers.JSONField:
    """Any JSON value: the view says what it takes (its own 422 names the way out)."""
    return serializers.JSONField(required=False, allow_null=True, **kwargs)


def _text(max_length: int | None = None, **kwargs: Any) -> serializers.CharField:
    """A string as sent (blank allowed, never trimmed), at most ``max_length`` long."""
    return serializers.CharField(required=False, allow_null=True, allow_blank=True,
                                 trim_whitespace=False, max_length=max_length, **kwargs)


def _whole(**kwargs: Any) -> serializers.IntegerField:
    return serializers.IntegerField(required=False, allow_null=True, **kwargs)


class Page(serializers.Serializer):
    """A list's page: ``limit`` (1 to 1000; past it, 1000) and ``offset``."""

    limit = _whole(help_text="At most this many (1 to 1000).")
    offset = _whole(help_text="Skip this many (up to PLANWATCH_MAX_SEARCH_OFFSET).")


class ThreadBody(serializers.Serializer):
    """``POST /threads``, ``PATCH /threads/<id>``: the thread's metadata."""

    thread_id = _text(100, help_text="A UUID for the new thread (POST).")
    if_exists = _text(20, help_text="raise (409) or do_nothing (POST).")
    metadata = _object()

    def validate_metadata(self, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """``graph_id`` names the thread's graph: a string that fits its column."""
        graph = (value or {}).get("graph_id")
        if graph is not None and (not isinstance(graph, str) or len(graph) > GRAPH_ID_MAX):
            raise serializers.ValidationError({"graph_id": (
                f"a graph's name of at most {GRAPH_ID_MAX} characters (see GET /info and "
                "POST /assistants/search for the graphs served)")})
        return value


class ThreadSearchBody(Page):
    """``POST /threads/search``."""

    metadata = _object()
    ids = _any(help_text="Thread UUIDs.")
    status = _text(20)
    sort_by = _text(20)
    sort_order = _text(20)
    order_by = _text(100, help_text=(
        "Aegra's sort, 'created_at ASC' (a sort key, then ASC or DESC); sort_by wins."))


class HistoryBody(Page):
    """``POST /threads/<id>/history``."""

    before = _any(help_text="A checkpoint id, or a checkpoint object.")
    checkpoint = _any()


class StateBody(serializers.Serializer):
    """``POST /threads/<id>/state`` (an update) and ``…/state/checkpoint`` (a read)."""

    values = _any()
    as_node = _any()
    checkpoint_id = _any()
    checkpoint = _any()
    subgraphs = _any()


class RunsCancelBody(serializers.Serializer):
    """``POST /runs/cancel``: ``thread_id`` and ``run_ids``, or a ``status``."""

    thread_id = _text(100, help_text="The thread of run_ids.")
    run_ids = _any(help_text="Run UUIDs of the thread.")
    status = _text(20, help_text="pending, running or all: every run of yours so.")


class RunBody(serializers.Serializer):
    """A run request (``POST /threads/<id>/runs`` and its stream and wait, the stateless
    ones, and what a cron keeps)."""

    assistant_id = _text(200, help_text="A graph's name or an assistant's UUID.")
    input = _any()
    command = _object()
    config = _object()
    context = _object()  # type: ignore[assignment]  # a field, popped by the metaclass
    metadata = _object()
    checkpoint_id = _text(100)
    checkpoint = _any()
    interrupt_before = _any()
    interrupt_after = _any()
    multitask_strategy = _text(20)
    stream_mode = _any()
    stream_subgraphs = _any()
    if_not_exists = _text(20)
    on_completion = _text(20)
    webhook = _any()


class AssistantBody(serializers.Serializer):
    """``POST /assistants`` and ``PATCH /assistants/<id>``."""

    assistant_id = _text(100)
    graph_id = _text(GRAPH_ID_MAX)
    name = _text(NAME_MAX)
    description = _text()
    config = _object()
    context = _object()  # type: ignore[assignment]  # a field, popped by the metaclass
    metadata = _object()
    if_exists = _text(20)


class AssistantLatestBody(serializers.Serializer):
    """``POST /assistants/<id>/latest``: the version to point at."""

    version = serializers.IntegerField(
        min_value=1, max_value=VERSION_MAX,
        error_messages={"invalid": "a version number (a whole number from 1); list them "
                                   "with POST /assistants/<id>/versions"})


class SearchBody(Page):
    """A search's metadata filter (an assistant's versions)."""

    metadata = _object()


class AssistantSearchBody(SearchBody):
    """``POST /assistants/search`` and ``/assistants/count``."""

    graph_id = _text(GRAPH_ID_MAX)
    name = _text(NAME_MAX)
    sort_by = _text(20)
    sort_order = _text(20)


class CronSearchBody(SearchBody):
    """``POST /runs/crons/search`` and ``/runs/crons/count``."""

    assistant_id = _text(100)
    thread_id = _text(100)
    enabled = _any()
    sort_by = _text(20)
    sort_order = _text(20)


class CronBody(RunBody):
    """``POST /runs/crons``, ``POST /threads/<id>/runs/crons``, ``PATCH /runs/crons/<id>``:
    a run request and when to start it. Whether a schedule ever fires is the cron service's
    to say; here it must fit its column."""

    schedule = serializers.CharField(
        max_length=SCHEDULE_MAX, required=False, trim_whitespace=False,
        error_messages={"max_length": f"at most {SCHEDULE_MAX} characters; a cron "
                                      "expression such as '0 3 * * *' (UTC)"})
    end_time = serializers.DateTimeField(
        required=False, allow_null=True, default_timezone=UTC,
        error_messages={"invalid": "an ISO 8601 date and time such as "
                                   "'2026-12-31T23:00:00Z' (a real date, hour and offset)",
                        "overflow": "a date and time between the years 1 and 9999"})
    enabled = _any()


class StoreItemBody(serializers.Serializer):
    """``DELETE /store/items``: which item."""

    namespace = _any(help_text='Labels, such as ["memories", "ann"].')
    key = _any()


class StorePutBody(StoreItemBody):
    """``PUT /store/items``: an item, its ``ttl`` in minutes bounded."""

    value = _any()
    ttl = serializers.FloatField(
        required=False, allow_null=True, min_value=TTL_MIN_MINUTES, max_value=TTL_MAX_MINUTES,
        error_messages={
            "min_value": f"minutes until it expires, at least {TTL_MIN_MINUTES:.4f} (one "
                         "second); or null to keep it",
            "max_value": f"minutes until it expires, at most {TTL_MAX_MINUTES} (about a "
                         "hundred years); or null to keep it",
            "invalid": "minutes until it expires (a number), or null to keep it"})


class StoreSearchBody(Page):
    """``POST /store/items/search``: a filter of value fields and LangGraph's operators."""

    namespace_prefix = _any()
    filter = _object()
    query = _any()
    refresh_ttl = _any()

    def validate_filter(self, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """Keys are value fields; an object value holds only LangGraph's operators."""
        for key, wanted in (value or {}).items():
            if not FILTER_KEY.match(key):
                raise serializers.ValidationError(
                    f"key {key!r} is not a value field name (letters, digits, '_', '.', '-')")
            if isinstance(wanted, dict):
                unknown = [op for op in wanted if op not in STORE_OPERATORS]
                if unknown or not wanted:
                    raise serializers.ValidationError({key: (
                        f"{', '.join(map(repr, unknown)) or 'an empty object'} is not an "
                        f"operator; use one of {', '.join(STORE_OPERATORS)}, or a plain "
                        "value to match it exactly")})
        return value


class StoreNamespacesBody(Page):
    """``POST /store/namespaces``."""

    prefix = _any()
    suffix = _any()
    max_depth = _any()


def parse(data: dict[str, Any], shape: type[serializers.Serializer]) -> dict[str, Any]:
    """``data`` with the fields ``shape`` declares checked and converted (422 naming the
    first bad one); the fields it does not declare as sent. A body whose every declared
    field the shape would take as it is (:func:`taken_as_sent`) is not run through the
    serializer (a run request's took a millisecond there)."""
    if taken_as_sent(data, shape):
        return dict(data)
    serializer = shape(data=data)
    serializer.is_valid(raise_exception=True)
    return {**data, **serializer.validated_data}


_TEXT, _JSON, _OBJECT = "text", "json", "object"
_PLAIN: dict[type[serializers.Serializer], dict[str, tuple[str, int | None]]] = {}
"""Each shape's fields by name: how a value passes it unchanged (None: one that may
change or refuse it, a whole number say, or a field the shape validates itself)."""
_FILLED: dict[type[serializers.Serializer], frozenset[str]] = {}
"""Each shape's fields the serializer acts on when they are absent: a required one (it
refuses the body) or one with a default (it fills it in)."""


def _filled_fields(shape: type[serializers.Serializer]) -> frozenset[str]:
    known = _FILLED.get(shape)
    if known is None:
        known = _FILLED[shape] = frozenset(
            name for name, f in shape().fields.items()
            if f.required or f.default is not serializers.empty)
    return known


def _plain_fields(shape: type[serializers.Serializer]) -> dict[str, tuple[str, int | None]]:
    known = _PLAIN.get(shape)
    if known is None:
        known = {}
        if shape.validate is serializers.Serializer.validate:  # no checks of its own
            for name, f in shape().fields.items():
                if hasattr(shape, f"validate_{name}") or f.source != name:
                    continue
                if type(f) is serializers.CharField and f.allow_null and f.allow_blank \
                        and not f.trim_whitespace and f.min_length is None and all(
                            isinstance(v, _TEXT_CHECKS) for v in f.validators):
                    known[name] = (_TEXT, f.max_length)
                elif type(f) in (serializers.JSONField, JSONObjectField) and f.allow_null \
                        and not getattr(f, "binary", True) and not f.validators:
                    known[name] = (_OBJECT if type(f) is JSONObjectField else _JSON, None)
        _PLAIN[shape] = known
    return known


_TEXT_CHECKS = (MaxLengthValidator, ProhibitNullCharactersValidator,
                ProhibitSurrogateCharactersValidator)
"""The checks DRF gives a text field: what :func:`taken_as_sent` checks for it."""


_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")


def taken_as_sent(data: dict[str, Any], shape: type[serializers.Serializer]) -> bool:
    """Whether ``shape`` would take every field of ``data`` it declares unchanged: a text
    field's string that fits (no NUL, no lone surrogate, as DRF's validators refuse), a
    JSON object's object, any JSON value (the body was JSON), or null for each; absent
    fields are skipped as the serializer skips them, unless it would refuse or fill one
    (a required field, or one with a default: the serializer's answer then)."""
    if not _filled_fields(shape).issubset(data):
        return False
    plain = _plain_fields(shape)
    declared = shape._declared_fields
    for name, value in data.items():
        if name not in declared:
            continue
        how = plain.get(name)
        if how is None:
            return False
        kind, longest = how
        if value is None or kind == _JSON:
            continue
        if kind == _OBJECT:
            if not isinstance(value, dict):
                return False
        elif not isinstance(value, str) or (longest is not None and len(value) > longest) \
                or _BAD_TEXT.search(value):
            return False
    return True
