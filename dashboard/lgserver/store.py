"""``/store``: LangGraph's long-term memory (its own ``BaseStore`` in Planwatch's database).

The items graphs write with ``get_store()`` are the ones served here: put, get, delete,
search under a namespace prefix (with a value filter), and list namespaces; an item may
carry a ``ttl`` in minutes. Writing needs ``start_run``, deleting ``delete_run``.
An item written here is its writer's (:mod:`dashboard.policy`): another user (not of the
team) does not find it, and cannot overwrite or delete it. An item a graph wrote inside a
run is the graph's shared memory (any run of the graph reads and changes it too): every
signed-in user reads it, and changes it with the action's permission, as on LangGraph's
server, whose store namespaces are shared unless an auth handler scopes them.
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from dashboard import store_items
from dashboard.lgserver import bodies
from dashboard.lgserver.views import LangGraphView, body, limit_of, offset_of, require


def namespace_of(value: Any, field: str = "namespace", *, empty: bool = False,
                 dotted: bool = False) -> tuple[str, ...]:
    """A namespace from a list of labels (or a dotted string, as ``GET`` sends it)."""
    if dotted and isinstance(value, str):
        value = value.split(".") if value else []
    if value is None and empty:
        value = []
    if (not isinstance(value, list) or not all(isinstance(v, str) and v and "." not in v
                                               for v in value)
            or (not value and not empty)):
        raise exceptions.ValidationError(
            {field: "a list of non-empty labels without '.', such as [\"memories\", \"ann\"]"})
    return tuple(value)


def _key(data: Any) -> str:
    key = data.get("key")
    if not isinstance(key, str) or not key:
        raise exceptions.ValidationError({"key": "the item's key (a non-empty string)"})
    return key


def _flag(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    return str(value).lower() in ("true", "1")


class StoreItemsView(LangGraphView):
    """``PUT``, ``GET`` and ``DELETE /store/items``."""

    request_shapes = {"put": bodies.StorePutBody, "delete": bodies.StoreItemBody}

    def put(self, request: Request) -> Response:
        require(request, "start_run", "writing to the store")
        data = body(request)
        value = data.get("value")
        if not isinstance(value, dict):
            raise exceptions.ValidationError({"value": "a JSON object"})
        store_items.store_put(user=request.user, namespace=namespace_of(data.get("namespace")),
                        key=_key(data), value=value, ttl=data.get("ttl"))
        return Response(status=204)

    def get(self, request: Request) -> Response:
        params = request.query_params
        namespace = namespace_of(params.get("namespace"), dotted=True)
        key = _key(params)
        item = store_items.store_get(user=request.user, namespace=namespace, key=key,
                               refresh_ttl=_flag(params.get("refresh_ttl")))
        if item is None:
            raise exceptions.NotFound(f"no item {key!r} in namespace {list(namespace)}")
        return Response(item)

    def delete(self, request: Request) -> Response:
        require(request, "delete_run", "deleting from the store")
        data = body(request)
        store_items.store_delete(user=request.user, namespace=namespace_of(data.get("namespace")),
                           key=_key(data))
        return Response(status=204)


class StoreSearchView(LangGraphView):
    """``POST /store/items/search``: items under a namespace prefix, by value filter."""

    request_shapes = {"post": bodies.StoreSearchBody}

    def post(self, request: Request) -> Response:
        data = body(request)
        found = data.get("filter")
        query = data.get("query")
        if query is not None and not isinstance(query, str):
            raise exceptions.ValidationError({"query": "a string"})
        items = store_items.store_search(user=request.user,
            namespace_prefix=namespace_of(data.get("namespace_prefix"), "namespace_prefix",
                                          empty=True),
            filter=found, limit=limit_of(data), offset=offset_of(data), query=query,
            refresh_ttl=_flag(data.get("refresh_ttl")))
        return Response({"items": items})


class StoreNamespacesView(LangGraphView):
    """``POST /store/namespaces``: the namespaces holding items."""

    request_shapes = {"post": bodies.StoreNamespacesBody}

    def post(self, request: Request) -> Response:
        data = body(request)
        depth = data.get("max_depth")
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int)
                                  or depth < 1):
            raise exceptions.ValidationError({"max_depth": "a whole number from 1"})
        prefix = data.get("prefix")
        suffix = data.get("suffix")
        found = store_items.store_namespaces(user=request.user,
            prefix=namespace_of(prefix, "prefix") if prefix else None,
            suffix=namespace_of(suffix, "suffix") if suffix else None,
            max_depth=depth, limit=limit_of(data, 100), offset=offset_of(data))
        return Response({"namespaces": found})
