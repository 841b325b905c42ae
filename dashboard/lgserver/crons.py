"""``/runs/crons`` and ``/threads/<id>/runs/crons``: scheduled runs.

A cron keeps a run request (input, config, context, metadata, breakpoints, strategy) and
a schedule; :mod:`dashboard.crons` starts it when due. Creating and changing one needs
``start_run`` (and what its request needs), deleting ``delete_run``. A cron is its
user's (:mod:`dashboard.policy`): another user (not of the team) gets the 404 of an
unknown one, and search and count find only theirs; it runs as its user.
"""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from dashboard import crons, policy, selectors
from dashboard.lgserver import bodies, shapes
from dashboard.lgserver.views import (
    LangGraphView,
    body,
    limit_of,
    object_of,
    offset_of,
    order_of,
    require,
    run_request,
    thread_of,
)
from dashboard.models import Cron

SORTABLE = {"cron_id": "id", "assistant_id": "assistant_id", "thread_id": "thread_id",
            "created_at": "created_at", "updated_at": "updated_at",
            "next_run_date": "next_run_date", "end_time": "end_time"}
"""LangGraph's cron sort keys and their columns."""


def cron_shape(cron: Cron) -> dict[str, Any]:
    """A cron as LangGraph's server shapes it."""
    return {
        "cron_id": str(cron.id), "assistant_id": cron.assistant_id,
        "thread_id": str(cron.thread_id) if cron.thread_id else None,
        "on_run_completed": None if cron.thread_id else "keep",
        "end_time": shapes.iso(cron.end_time), "schedule": cron.schedule, "timezone": "UTC",
        "created_at": shapes.iso(cron.created_at), "updated_at": shapes.iso(cron.updated_at),
        "payload": {"assistant_id": cron.assistant_id, **(cron.payload or {})},
        "user_id": str(cron.user_id) if cron.user_id else None,
        "next_run_date": shapes.iso(cron.next_run_date), "metadata": cron.metadata or {},
        "enabled": cron.enabled,
    }


def _enabled(data: dict[str, Any]) -> bool | None:
    value = data.get("enabled")
    if value is not None and not isinstance(value, bool):
        raise exceptions.ValidationError({"enabled": "true or false"})
    return value


def _payload(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    """The run request a cron keeps, checked (and permitted) as a run request now."""
    run_request(request, data)
    return {key: data[key] for key in crons.REQUEST_FIELDS if data.get(key) is not None}


def _create(request: Request, thread_id: str | None) -> Response:
    require(request, "start_run", "scheduling runs")
    data = body(request)
    if "schedule" not in data:
        raise exceptions.ValidationError({"schedule": "required: a cron expression"})
    thread = thread_of(thread_id) if thread_id else None
    payload = _payload(request, data)
    enabled = _enabled(data)
    cron = crons.cron_create(
        assistant_id=str(data["assistant_id"]), schedule=data["schedule"], user=request.user,
        thread=thread, payload=payload, metadata=object_of(data, "metadata"),
        end_time=data.get("end_time"), enabled=True if enabled is None else enabled)
    return Response(cron_shape(cron))


def cron_of(request: Request, cron_id: str) -> Cron:
    """The cron, or 404 (also for another user's)."""
    try:
        return policy.crons_visible(request.user).get(id=uuid.UUID(str(cron_id)))
    except (ValueError, Cron.DoesNotExist):
        raise exceptions.NotFound(f"no cron {cron_id}; list them with POST /runs/crons/search"
                                  ) from None


class CronsView(LangGraphView):
    """``POST /runs/crons``: a cron whose runs each get a new thread."""

    request_shapes = {"post": bodies.CronBody}

    def post(self, request: Request) -> Response:
        return _create(request, None)


class ThreadCronsView(LangGraphView):
    """``POST /threads/<id>/runs/crons``: a cron whose runs go on the thread."""

    request_shapes = {"post": bodies.CronBody}

    def post(self, request: Request, thread_id: str) -> Response:
        return _create(request, thread_id)


class CronView(LangGraphView):
    """``PATCH`` and ``DELETE /runs/crons/<id>``."""

    request_shapes = {"patch": bodies.CronBody}

    def patch(self, request: Request, cron_id: str) -> Response:
        require(request, "start_run", "changing a scheduled run")
        cron = cron_of(request, cron_id)
        data = body(request)
        payload = {k: data[k] for k in crons.REQUEST_FIELDS if data.get(k) is not None}
        if payload:
            run_request(request, {"assistant_id": cron.assistant_id, **payload})
        updated = crons.cron_update(
            cron=cron, schedule=data.get("schedule"), payload=payload,
            metadata=object_of(data, "metadata") if data.get("metadata") is not None else None,
            end_time=data.get("end_time"), enabled=_enabled(data))
        return Response(cron_shape(updated))

    def delete(self, request: Request, cron_id: str) -> Response:
        require(request, "delete_run", "deleting a scheduled run")
        crons.cron_delete(cron=cron_of(request, cron_id))
        return Response(status=204)


def _filtered(request: Request, data: dict[str, Any]) -> Any:
    found = policy.crons_visible(request.user)
    if data.get("assistant_id"):
        found = found.filter(assistant_id=str(data["assistant_id"]))
    if data.get("thread_id"):
        found = found.filter(thread_id=thread_of(data["thread_id"]).id)
    enabled = _enabled(data)
    if enabled is not None:
        found = found.filter(enabled=enabled)
    return selectors.metadata_match(found, object_of(data, "metadata"))


class CronSearchView(LangGraphView):
    """``POST /runs/crons/search``: by assistant, thread, enabled, metadata; sorted, paged."""

    request_shapes = {"post": bodies.CronSearchBody}

    def post(self, request: Request) -> Response:
        data = body(request)
        offset = offset_of(data)
        found = _filtered(request, data).order_by(*order_of(data, SORTABLE))
        return Response([cron_shape(c) for c in found[offset: offset + limit_of(data)]])


class CronCountView(LangGraphView):
    """``POST /runs/crons/count``."""

    request_shapes = {"post": bodies.CronSearchBody}

    def post(self, request: Request) -> Response:
        return Response(_filtered(request, body(request)).count())
