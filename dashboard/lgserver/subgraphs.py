"""``GET /assistants/<id>/subgraphs[/<namespace>]``: a graph's subgraphs and their schemas.

As LangGraph's server answers it: an object keyed by each subgraph's namespace (its node's
name; ``parent|child`` for a nested one), each value the subgraph's schemas (the shape of
``GET /assistants/<id>/schemas`` without its ``graph_id``). Without ``recurse`` only the
graph's own subgraphs are listed; with it, theirs too. A ``namespace`` narrows the answer
to that subgraph (and, with ``recurse``, what is nested in it).
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from dashboard.checkpoints import compiled
from dashboard.lgserver.views import LangGraphView, spec_of

TRUE = ("true", "True", "1", "yes")
FALSE = ("", "false", "False", "0", "no")


def _flag(request: Request, name: str) -> bool:
    """A boolean query parameter, or 422 naming it."""
    value = request.query_params.get(name, "")
    if value not in TRUE + FALSE:
        raise exceptions.ValidationError({name: f"{value!r} is not a boolean; send true or false"})
    return value in TRUE


def _schema(make: Any) -> Any:
    try:
        return make()
    except Exception:  # a schema LangGraph cannot describe
        return None


def graph_schemas(graph: Any) -> dict[str, Any]:
    """A compiled graph's schemas, as ``/schemas`` and ``/subgraphs`` describe them."""
    return {
        "input_schema": _schema(graph.get_input_jsonschema),
        "output_schema": _schema(graph.get_output_jsonschema),
        "state_schema": _schema(graph.get_input_jsonschema),
        # as /schemas: a run's config is not passed to the graph (Planwatch sets its thread)
        "config_schema": {"title": "Config", "type": "object", "properties": {}},
        "context_schema": _schema(graph.get_context_jsonschema),
    }


def subgraphs_of(graph: Any, *, namespace: str | None, recurse: bool) -> dict[str, Any]:
    """The subgraphs of ``graph`` by namespace (LangGraph's ``get_subgraphs``)."""
    return {ns: graph_schemas(sub)
            for ns, sub in graph.get_subgraphs(namespace=namespace, recurse=recurse)}


class AssistantSubgraphsView(LangGraphView):
    """``GET /assistants/<id>/subgraphs[/<namespace>]`` (``recurse``: nested ones too)."""

    def get(self, request: Request, assistant_id: str, namespace: str | None = None
            ) -> Response:
        spec = spec_of(assistant_id)
        recurse = _flag(request, "recurse")
        return Response(subgraphs_of(compiled(spec.name), namespace=namespace or None,
                                     recurse=recurse))
