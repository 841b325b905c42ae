"""The registry of planner graphs: the only way the dashboard learns about a graph.

A graph module names its :class:`~planner.spec.GraphSpec` ``SPEC``; the host lists the
modules to load (``PLANWATCH["GRAPH_MODULES"]``, the built-in planners by default) and
:func:`load_graphs` imports them. A graph's builder returns an *uncompiled* ``StateGraph``;
the host compiles it with its own checkpointer (the graph never knows its storage).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from planner.llm import LLMPort
from planner.search import SearchPort
from planner.spec import (
    GraphSpec,
    InputError,
    InputField,
    TaskView,
    clean_inputs,
)

BUILTIN_MODULES = ("planner.acquisition", "planner.decomposition")
"""The planners Planwatch ships: the default of ``PLANWATCH["GRAPH_MODULES"]``."""

GRAPHS: dict[str, GraphSpec] = {}
_loaded = False


def register(spec: GraphSpec) -> GraphSpec:
    """Add ``spec`` to the registry; a second graph of the same name is an error."""
    if spec.name in GRAPHS and GRAPHS[spec.name] is not spec:
        raise ValueError(f"graph {spec.name!r} is already registered")
    GRAPHS[spec.name] = spec
    return spec


def load_graphs(modules: Iterable[str]) -> list[GraphSpec]:
    """Import each module and register its ``SPEC`` (a module may also register itself).

    Raises ``ImportError`` naming the module that cannot be imported.
    """
    global _loaded
    _loaded = True
    loaded = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise ImportError(f"graph module {name!r} cannot be imported ({exc}); fix its "
                              "path or remove it from PLANWATCH_GRAPH_MODULES") from exc
        spec = getattr(module, "SPEC", None)
        if isinstance(spec, GraphSpec):
            loaded.append(register(spec))
    return loaded


def _ensure_loaded() -> None:
    """Outside a host that loaded its list (a script, the planner's tests): the built-ins."""
    if not _loaded:
        load_graphs(BUILTIN_MODULES)


def get_graph(name: str) -> GraphSpec:
    """Return the registered graph ``name`` or raise ``KeyError`` naming the known ones."""
    _ensure_loaded()
    try:
        return GRAPHS[name]
    except KeyError:
        known = ", ".join(sorted(GRAPHS)) or "(none)"
        raise KeyError(f"unknown graph {name!r}; registered graphs: {known}") from None


def all_graphs() -> list[GraphSpec]:
    """Every registered graph, sorted by name."""
    _ensure_loaded()
    return [GRAPHS[n] for n in sorted(GRAPHS)]


__all__ = [
    "BUILTIN_MODULES",
    "GRAPHS",
    "GraphSpec",
    "InputError",
    "InputField",
    "LLMPort",
    "SearchPort",
    "TaskView",
    "all_graphs",
    "clean_inputs",
    "get_graph",
    "load_graphs",
    "register",
]
