"""A LangGraph run request's ``command``, parsed once at the door into a frozen, typed
:class:`~dashboard.thread_runs.Command` (no server: the fast layer)."""

from __future__ import annotations

import dataclasses

import pytest

from dashboard.services import RunInputError
from dashboard.thread_runs import Command, CommandKind, RunRequest, Unsupported


@pytest.mark.parametrize(("raw", "parsed"), [
    (None, None),
    ({}, None),  # as LangGraph's server: an empty command is none
    ({"resume": "yes"}, Command(CommandKind.RESUME, resume="yes")),
    ({"resume": None}, Command(CommandKind.RESUME, resume=None)),  # None is an answer
    ({"resume": {"a": 1}, "update": {"item": "desk"}},
     Command(CommandKind.RESUME, resume={"a": 1}, update={"item": "desk"})),
    ({"update": {"item": "desk"}}, Command(CommandKind.UPDATE, update={"item": "desk"})),
    ({"goto": "__end__"}, Command(CommandKind.END)),
    ({"goto": "__end__", "update": {"max_iters": 7}},
     Command(CommandKind.END, update={"max_iters": 7})),
    ({"goto": "__end__", "update": None}, Command(CommandKind.END)),
])
def test_a_command_is_parsed_once_into_its_kind(raw, parsed):
    assert Command.parse(raw) == parsed


@pytest.mark.parametrize(("raw", "error", "field", "said"), [
    (["resume"], RunInputError, "command", "an object"),
    ("resume", RunInputError, "command", "an object"),
    ({"update": None}, RunInputError, "command.update", "nothing to do"),
    ({"goto": "tick"}, Unsupported, "command.goto", "goto '__end__'"),
    ({"goto": ["__end__"]}, Unsupported, "command.goto", "goto '__end__'"),
    ({"goto": "__end__", "resume": "yes"}, Unsupported, "command.resume", "no resume"),
    ({"resume": "yes", "graph": "x"}, Unsupported, "command.graph", "not served"),
    ({"Send": 1, "resume": 2}, Unsupported, "command.Send", "not served"),
])
def test_a_command_of_another_shape_is_refused_naming_its_field(raw, error, field, said):
    with pytest.raises(error, match=said) as refused:
        Command.parse(raw)
    assert field in refused.value.errors, refused.value.errors


def test_the_request_and_its_command_are_frozen():
    req = RunRequest(assistant_id="orders", command=Command.parse({"resume": "yes"}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.command = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.command.update = {"item": "x"}  # type: ignore[misc,union-attr]


def test_a_state_update_is_a_command_of_its_own_kind_its_updates_a_tuple():
    """``POST /threads/<id>/state`` is decided by the same function as a run request's
    command (``thread_runs._decide_command``): parsed once into a frozen value too."""
    updates = [{"item": "desk"}, None]
    command = Command.state_update(updates, "__end__")
    assert command == Command(CommandKind.STATE, updates=({"item": "desk"}, None),
                              as_node="__end__")
    updates.append({"quantity": 9})  # the client's list, changed later, changes nothing
    assert len(command.updates) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        command.as_node = "price"  # type: ignore[misc]
