"""The registry of planner graphs: the only way the dashboard learns about a graph.

A graph module names its :class:`~planner.spec.GraphSpec` ``SPEC``; the host lists the
modules to load (``PLANWATCH["GRAPH_MODULES"]``, the built-in planners by default) and
:func:`load_graphs` imports them. A graph's builder returns an *uncompiled* ``StateGraph``;
the host compiles it with its own checkpointer (the graph never knows its storage).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from planner.langgraph_config import load_config
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
FAILED: dict[str, str] = {}
"""Graphs a ``langgraph.json`` names that could not be loaded, with their error."""
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


def load_langgraph_config(path: str) -> list[GraphSpec]:
    """Register every graph of a ``langgraph.json``; keep the error of each that fails.

    Raises :class:`~planner.langgraph_config.ConfigError` if the file itself is unusable.
    """
    _ensure_loaded()  # a name the built-ins (or the listed modules) hold is refused
    specs, failed = load_config(path)
    loaded = []
    for spec in specs:
        try:
            loaded.append(register(spec))
        except ValueError as exc:
            failed[spec.name] = f"{exc}; rename it in {path}"
    FAILED.update(failed)
    return loaded


def failed_graphs() -> dict[str, str]:
    """``{name: error}`` of the ``langgraph.json`` graphs that could not be loaded."""
    return dict(sorted(FAILED.items()))


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
    "failed_graphs",
    "get_graph",
    "load_graphs",
    "load_langgraph_config",
    "register",
]
