"""The declared shapes of request bodies: a body each shape takes as sent skips the
serializer, and says exactly what the serializer would; anything else goes through it."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework import exceptions, serializers

from dashboard.lgserver import bodies

SHAPES = sorted({shape for shape in vars(bodies).values()
                 if isinstance(shape, type) and issubclass(shape, serializers.Serializer)
                 and shape.__module__ == bodies.__name__}, key=lambda shape: shape.__name__)
"""Every shape the module declares (a required field absent, as in AssistantLatestBody's
``version``, was taken as sent and the view met a KeyError: a 500 schemathesis found)."""

BODIES: list[dict[str, Any]] = [
    {},
    {"assistant_id": "acquisition", "input": {"goal": "x"}, "stream_mode": ["updates"]},
    {"assistant_id": None, "input": None, "config": None, "metadata": {"a": [1, 2.5]}},
    {"assistant_id": "", "checkpoint_id": " padded ", "command": {"resume": 1},
     "if_not_exists": "create", "undeclared": {"kept": True}},
    {"thread_id": "6f1c…", "if_exists": "do_nothing", "metadata": {"graph_id": "acquisition"}},
    {"limit": 5, "offset": 0, "status": "idle", "ids": ["a"], "sort_by": "created_at"},
    {"namespace": ["a"], "key": "k", "value": {"v": 1}, "ttl": 2},
    {"filter": {"x": {"$eq": 1}}, "query": "q"},
    {"schedule": "0 3 * * *", "end_time": "2026-12-31T23:00:00Z", "enabled": True},
    # refused, or converted, by the serializer
    {"assistant_id": 12},
    {"assistant_id": "x" * 201},
    {"checkpoint_id": "a\x00b"},
    {"multitask_strategy": "\ud800"},
    {"config": ["not", "an", "object"]},
    {"metadata": "text"},
    {"thread_id": True},
    {"limit": "7"},
    {"metadata": {"graph_id": 3}},
]


def _serialized(data: dict[str, Any], shape: Any) -> dict[str, Any] | str:
    serializer = shape(data=data)
    if not serializer.is_valid():
        return f"refused: {serializer.errors}"
    return {**data, **serializer.validated_data}


def _parsed(data: dict[str, Any], shape: Any) -> dict[str, Any] | str:
    try:
        return bodies.parse(data, shape)
    except exceptions.ValidationError as exc:
        return f"refused: {exc.detail}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.__name__)
@pytest.mark.parametrize("data", BODIES)
def test_a_body_is_parsed_as_its_shapes_serializer_parses_it(shape, data):
    assert _parsed(data, shape) == _serialized(data, shape)


def test_a_run_request_as_clients_send_it_skips_the_serializer(monkeypatch):
    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the serializer ran")

    data = {"assistant_id": "acquisition", "input": {"goal": "x"}, "config": {},
            "stream_mode": ["custom", "updates"], "on_disconnect": "cancel"}
    monkeypatch.setattr(bodies.RunBody, "is_valid", refused)
    assert bodies.parse(data, bodies.RunBody) == data
    with pytest.raises(AssertionError, match="the serializer ran"):
        bodies.parse({**data, "assistant_id": 7}, bodies.RunBody)


def test_a_field_the_shape_checks_itself_goes_through_the_serializer():
    assert "metadata" not in bodies._plain_fields(bodies.ThreadBody)
    assert "filter" not in bodies._plain_fields(bodies.StoreSearchBody)
    assert "end_time" not in bodies._plain_fields(bodies.CronBody)
    assert "limit" not in bodies._plain_fields(bodies.Page)
