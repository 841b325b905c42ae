"""A thread's state, read and written as LangGraph's server does.

- ``GET /threads/<id>/state`` (``subgraphs``), ``GET …/state/<checkpoint_id>`` and
  ``POST …/state/checkpoint`` (``{"checkpoint": {...}, "subgraphs": …}``) read it: the
  latest state, or the state at a checkpoint of the thread's history;
- ``POST …/state`` writes it with LangGraph's ``update_state``: ``values`` an object, a
  list of objects, or null (``{}`` and ``[]`` as null: a new checkpoint written as the
  node that ran last, or as ``as_node``, with nothing changed, as LangGraph does), at the
  latest checkpoint or at ``checkpoint_id`` / ``checkpoint``.

A list of objects is applied in order, each as one update (one checkpoint each, as
LangGraph's ``bulk_update_state`` applies supersteps); every item is checked against the
graph's state schema before any is written. LangGraph's own ``update_state`` refuses a
list of plain objects ("Expected dict"); Planwatch takes it so (see the README).
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from dashboard.lgserver import bodies, shapes
from dashboard.lgserver.subgraphs import FALSE, TRUE
from dashboard.lgserver.views import LangGraphView, applied, body, require, thread_of
from dashboard.models import Thread
from dashboard.services import RunStateError
from dashboard.thread_runs import Command, RunRequest, holder_of


class NoGraph(exceptions.APIException):
    """A state update on a thread no run has been made on: no graph to write it as (400,
    as LangGraph's server answers a thread without a graph ID)."""

    status_code = 400
    default_detail = "the thread has no associated graph; start a run on it first"
    default_code = "no_graph"


def _subgraphs(value: Any) -> bool:
    """``subgraphs`` as a query parameter or a JSON value; 422 naming it otherwise."""
    if isinstance(value, bool):
        return value
    if value is None or str(value) in TRUE + FALSE:
        return str(value) in TRUE
    raise exceptions.ValidationError({"subgraphs": f"{value!r} is not a boolean; send true "
                                                   "or false"})


def _checkpoint_id(data: dict[str, Any]) -> str:
    """The checkpoint a request names (``checkpoint.checkpoint_id``, or ``checkpoint_id``)."""
    checkpoint = data.get("checkpoint")
    if checkpoint is not None and not isinstance(checkpoint, dict):
        raise exceptions.ValidationError({"checkpoint": (
            'an object such as {"checkpoint_id": "…"}, as a state\'s "checkpoint" is')})
    found = (checkpoint or {}).get("checkpoint_id") or data.get("checkpoint_id") or ""
    if not isinstance(found, str):
        raise exceptions.ValidationError({"checkpoint_id": "a checkpoint id (a string)"})
    return found


def _state_at(thread: Thread, checkpoint_id: str, subgraphs: bool) -> dict[str, Any]:
    """The thread's state at ``checkpoint_id`` (its latest when empty)."""
    tid = str(thread.id)
    if checkpoint_id:
        return shapes.run_state(holder_of(thread, checkpoint_id), tid, checkpoint_id,
                                subgraphs=subgraphs)
    return shapes.run_state(thread.latest_run(), tid, subgraphs=subgraphs)


class ThreadStateView(LangGraphView):
    """``GET /threads/<id>/state`` reads it; ``POST`` updates it (as a node)."""

    request_shapes = {"post": bodies.StateBody}

    def get(self, request: Request, thread_id: str) -> Response:
        subgraphs = _subgraphs(request.query_params.get("subgraphs"))
        return Response(_state_at(thread_of(thread_id), "", subgraphs))

    def post(self, request: Request, thread_id: str) -> Response:
        require(request, "fork_run", "editing a thread's state")
        thread = thread_of(thread_id)
        data = body(request)
        checkpoint = _checkpoint_id(data)
        as_node = data.get("as_node") or ""
        if not isinstance(as_node, str):
            raise exceptions.ValidationError({"as_node": "a node name"})
        values = data.get("values")
        updates = _updates(None if values in ({}, []) else values)
        latest = thread.latest_run()
        if latest is None and thread.graph:  # LangGraph's server writes it; see the README
            raise RunStateError(f"thread {thread.id} (graph {thread.graph!r}) has no run yet, "
                                "and a state update is recorded in its run's log; start a "
                                "run on the thread first, then update its state")
        if latest is None:
            raise NoGraph(f"thread {thread.id} has no associated graph (no assigned graph "
                          "ID): no run has been made on it yet; start a run on the thread "
                          "first, then update its state")
        # decided under the thread's lock as a run request's command is, and written on
        # the checkpoint it was decided on (else a 409 that writes nothing)
        new_id = applied(request, thread, RunRequest(
            assistant_id=latest.graph, checkpoint_id=checkpoint,
            command=Command.state_update(updates, as_node))).checkpoint
        written = {"thread_id": str(thread.id), "checkpoint_ns": "", "checkpoint_id": new_id,
                   "checkpoint_map": None}
        # as LangGraph's server answers it, its deprecated keys included
        return Response({"checkpoint": written, "configurable": written,
                         "checkpoint_id": new_id})


def _updates(values: Any) -> list[Any]:
    """The updates ``values`` makes: itself, or each object of a list, in order."""
    if not isinstance(values, list):
        return [values]
    if not all(isinstance(item, dict) and item for item in values):
        raise exceptions.ValidationError({"values": (
            "a list of updates must hold objects of channel names and values, such as "
            '[{"count": 1}]')})
    return values


class ThreadStateAtView(LangGraphView):
    """``GET /threads/<id>/state/<checkpoint_id>``: the state at that checkpoint."""

    def get(self, request: Request, thread_id: str, checkpoint_id: str) -> Response:
        subgraphs = _subgraphs(request.query_params.get("subgraphs"))
        return Response(_state_at(thread_of(thread_id), checkpoint_id, subgraphs))


class ThreadStateCheckpointView(LangGraphView):
    """``POST /threads/<id>/state/checkpoint``: the state at ``checkpoint`` (an object)."""

    request_shapes = {"post": bodies.StateBody}

    def post(self, request: Request, thread_id: str) -> Response:
        thread = thread_of(thread_id)
        data = body(request)
        if not isinstance(data.get("checkpoint"), dict):
            raise exceptions.ValidationError({"checkpoint": (
                'required: an object such as {"checkpoint_id": "…"}')})
        return Response(_state_at(thread, _checkpoint_id(data),
                                  _subgraphs(data.get("subgraphs"))))



