"""JSON text on the hot paths (``jsonsafe.dumps``/``dumpb``/``loads``): orjson's, and
whatever the standard library's ``json.dumps`` took is taken, and told the same."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import enum
import json
import uuid

import pytest

from dashboard.models import RunEvent
from dashboard.runs import jsonsafe


@dataclasses.dataclass
class Point:
    x: int


@pytest.mark.parametrize("value", [
    {"a": 1, "é": [1.5, None, True], "nested": {"s": "line\nbreak"}},
    {1: "an int key", None: "a None key"},  # orjson refuses these keys
    [2**70, -(2**70)],  # past 64 bits: orjson refuses them
    "ünïcode ✓",
])
def test_what_the_standard_library_wrote_reads_back_the_same(value):
    expected = json.loads(json.dumps(value))
    assert json.loads(jsonsafe.dumps(value)) == expected
    assert jsonsafe.loads(jsonsafe.dumpb(value)) == expected


def test_what_it_refused_is_refused_and_what_default_turned_into_text_is_that_text():
    moment = datetime.datetime(2026, 12, 7, 15, 0, tzinfo=datetime.UTC)
    for value in (moment, Point(1), {"at": moment}):
        with pytest.raises(TypeError):
            json.dumps(value)
        with pytest.raises(TypeError):
            jsonsafe.dumps(value)
    told = {"at": moment, "point": Point(2), "id": uuid.UUID(int=5)}
    assert json.loads(jsonsafe.dumps(told, default=str)) == json.loads(
        json.dumps(told, default=str))


class Level(enum.IntEnum):
    HIGH = 2


def test_subclasses_of_str_int_and_dict_are_written_as_their_base_by_orjson(monkeypatch):
    value = {"kind": RunEvent.Kind.CUSTOM, "level": Level.HIGH,
             "counts": collections.Counter(a=2), "ordered": collections.OrderedDict(b=[1])}
    expected = json.dumps(value, separators=(",", ":"))

    def refused(*args, **kwargs):
        raise AssertionError("the standard library's encoder was used")

    monkeypatch.setattr(jsonsafe.json, "dumps", refused)
    assert jsonsafe.dumps(value) == expected
    assert jsonsafe.loads(jsonsafe.dumpb(value)) == {
        "kind": "custom", "level": 2, "counts": {"a": 2}, "ordered": {"b": [1]}}
