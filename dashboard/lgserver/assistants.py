"""``/assistants``: create, read, update (a new version), delete, version and search.

A registered graph's own assistant (id = the graph's name) is listed beside the created
ones and cannot be changed; a created assistant is an
:class:`~dashboard.models.Assistant` with its versions. Writes go through
:mod:`dashboard.assistants`; creating and updating need ``start_run``, deleting ``delete_run``.
A created assistant is its creator's (:mod:`dashboard.policy`): another user (not of the
team) gets the 404 of an unknown one, and search and count find only theirs.
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from dashboard import assistants, services
from dashboard.lgserver import bodies, refusals, shapes
from dashboard.lgserver.views import (
    LangGraphView,
    body,
    limit_of,
    object_of,
    offset_of,
    order_of,
    require,
    resolve,
    sort_of,
)
from dashboard.models import Assistant, AssistantVersion
from planner.registry import GraphSpec, all_graphs


def assistant_shape(row: Assistant | AssistantVersion, *, versioned: bool = False
                    ) -> dict[str, Any]:
    """A created assistant (or one of its versions) as LangGraph's server shapes it."""
    owner = row if isinstance(row, Assistant) else row.assistant
    shaped = {
        "assistant_id": str(owner.id), "graph_id": row.graph, "name": row.name,
        "description": row.description or None, "config": row.config or {},
        "context": row.context or {}, "metadata": row.metadata or {},
        "version": row.version, "created_at": shapes.iso(row.created_at),
    }
    if not versioned:
        shaped["updated_at"] = shapes.iso(owner.updated_at)
    return shaped


def _text(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise exceptions.ValidationError({key: "a string"})
    return value


def _optional_dict(data: dict[str, Any], key: str) -> dict[str, Any] | None:
    return object_of(data, key) if data.get(key) is not None else None


def _config(data: dict[str, Any]) -> dict[str, Any] | None:
    """The assistant's ``config``; 422 for LangGraph's reserved keys in it (they would
    reach every run and cron of the assistant)."""
    config = _optional_dict(data, "config")
    if why := refusals.reserved_config(config):
        raise exceptions.ValidationError({"config.configurable": why})
    configurable = (config or {}).get("configurable")
    if isinstance(configurable, dict) and "budget" in configurable:
        services.budget_check(value=configurable["budget"], field="config.configurable.budget")
    return config


def _row(assistant_id: str, doing: str) -> Assistant:
    """The created assistant ``assistant_id``; 409 for a graph's own, 404 for none."""
    resolved = resolve(assistant_id)
    if resolved.assistant is None:
        raise assistants.AssistantExists(
            f"{assistant_id!r} is the own assistant of graph {resolved.spec.name!r} and cannot be "
            f"{doing}; create one of your own with POST /assistants")
    return resolved.assistant


class AssistantsView(LangGraphView):
    """``POST /assistants``: a new assistant of a graph (``if_exists``)."""

    request_shapes = {"post": bodies.AssistantBody}

    def post(self, request: Request) -> Response:
        require(request, "start_run", "creating an assistant")
        data = body(request)
        if not data.get("graph_id"):
            raise exceptions.ValidationError({"graph_id": "required: the graph it runs"})
        row = assistants.assistant_create(
            graph_id=str(data["graph_id"]), user=request.user,
            assistant_id=data.get("assistant_id"), name=_text(data, "name") or "",
            description=_text(data, "description") or "", config=_config(data) or {},
            context=object_of(data, "context"), metadata=object_of(data, "metadata"),
            if_exists=str(data.get("if_exists") or "raise"))
        return Response(assistant_shape(row))


class AssistantView(LangGraphView):
    """``GET``, ``PATCH`` (a new version) and ``DELETE /assistants/<id>``."""

    request_shapes = {"patch": bodies.AssistantBody}

    def get(self, request: Request, assistant_id: str) -> Response:
        resolved = resolve(assistant_id)
        if resolved.assistant is None:
            return Response(shapes.assistant(resolved.spec))
        return Response(assistant_shape(resolved.assistant))

    def patch(self, request: Request, assistant_id: str) -> Response:
        require(request, "start_run", "updating an assistant")
        data = body(request)
        row = assistants.assistant_update(
            assistant=_row(assistant_id, "updated"), graph_id=_text(data, "graph_id"),
            name=_text(data, "name"), description=_text(data, "description"),
            config=_config(data), context=_optional_dict(data, "context"),
            metadata=_optional_dict(data, "metadata"))
        return Response(assistant_shape(row))

    def delete(self, request: Request, assistant_id: str) -> Response:
        require(request, "delete_run", "deleting an assistant")
        row = _row(assistant_id, "deleted")
        assistants.assistant_delete(assistant=row, user=request.user,
                               delete_threads=request.query_params.get(
                                   "delete_threads") in ("true", "True", "1"))
        return Response(status=204)


class AssistantVersionsView(LangGraphView):
    """``POST /assistants/<id>/versions``: its versions, newest first."""

    request_shapes = {"post": bodies.SearchBody}

    def post(self, request: Request, assistant_id: str) -> Response:
        data = body(request)
        resolved = resolve(assistant_id)
        if resolved.assistant is None:  # a graph's own: its one version
            return Response([{k: v for k, v in shapes.assistant(resolved.spec).items()
                              if k != "updated_at"}])
        versions = assistants.assistant_versions(assistant=resolved.assistant,
                                            metadata=object_of(data, "metadata"))
        offset = offset_of(data)
        return Response([assistant_shape(v, versioned=True)
                         for v in versions.select_related("assistant")[
                             offset: offset + limit_of(data)]])


class AssistantLatestView(LangGraphView):
    """``POST /assistants/<id>/latest``: point it at one of its versions."""

    request_shapes = {"post": bodies.AssistantLatestBody}

    def post(self, request: Request, assistant_id: str) -> Response:
        require(request, "start_run", "changing an assistant's version")
        data = body(request)
        row = assistants.assistant_set_latest(assistant=_row(assistant_id, "versioned"),
                                         version=data["version"])
        return Response(assistant_shape(row))


def _filters(data: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    graph_id, name = _text(data, "graph_id") or "", _text(data, "name") or ""
    return graph_id, name, object_of(data, "metadata")


def _own(spec: GraphSpec, graph_id: str, name: str, metadata: dict[str, Any]) -> bool:
    """Whether a graph's own assistant passes the search filters."""
    shaped = shapes.assistant(spec)
    return ((not graph_id or spec.name == graph_id)
            and (not name or name.lower() in spec.name.lower())
            and all(shaped["metadata"].get(k) == v for k, v in metadata.items()))


class AssistantSearchView(LangGraphView):
    """``POST /assistants/search``: created assistants and the graphs' own, filtered by
    graph, name (a substring) and metadata, sorted, paged."""

    request_shapes = {"post": bodies.AssistantSearchBody}

    def post(self, request: Request) -> Response:
        data = body(request)
        graph_id, name, metadata = _filters(data)
        sort_by, order = sort_of(data, assistants.SORTABLE)
        offset, limit = offset_of(data), limit_of(data)
        rows = assistants.assistant_rows(user=request.user, graph_id=graph_id, name=name,
                                    metadata=metadata).order_by(
            *order_of(data, assistants.SORTABLE))
        # the top offset+limit of the union is among the rows' top ones and the graphs'
        found = [assistant_shape(r) for r in rows[: offset + limit + 1]]
        found += [shapes.assistant(s) for s in all_graphs()
                  if _own(s, graph_id, name, metadata)]
        found.sort(key=lambda a: str(a[sort_by] or ""), reverse=order == "desc")
        page = found[offset: offset + limit]
        headers = ({"X-Pagination-Next": str(offset + limit)}
                   if len(found) > offset + limit else {})
        return Response(page, headers=headers)


class AssistantCountView(LangGraphView):
    """``POST /assistants/count``: how many the same filters find."""

    request_shapes = {"post": bodies.AssistantSearchBody}

    def post(self, request: Request) -> Response:
        graph_id, name, metadata = _filters(body(request))
        rows = assistants.assistant_rows(user=request.user, graph_id=graph_id, name=name,
                                    metadata=metadata).count()
        return Response(rows + sum(_own(s, graph_id, name, metadata) for s in all_graphs()))
