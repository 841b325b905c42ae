"""Graphs from a ``langgraph.json``: each one registered as a :class:`GraphSpec`.

LangGraph's own server reads ``{"dependencies": [...], "graphs": {"name": "./file.py:attr"}}``
(paths relative to the JSON file, or ``package.module:attr``); so does Planwatch, when
``PLANWATCH_LANGGRAPH_CONFIG`` names the file. The attribute may be

- a compiled graph (its builder is compiled again with Planwatch's checkpointer, as
  LangGraph's server injects its own),
- an uncompiled ``StateGraph``,
- a factory, sync or async or a (sync or async) context manager, taking no argument, a
  ``RunnableConfig`` (``config``), the server runtime (``runtime``: a
  ``langgraph_sdk.runtime.ServerRuntime``), or both. As LangGraph's server does, it is
  called when the graph is loaded (``assistants.read``: its schemas, form and topology)
  and again for each run (``threads.create_run``: the run's config, and a runtime whose
  ``execution_runtime.context`` is the run's context and whose ``user`` is the user who
  started it), so a graph's shape may differ per run; a context manager stays entered
  while the run executes.

Such a graph declares nothing else: its start form comes from its input schema, its
questions get the generic answer form, its result card shows the final state, and its
input passes to the graph as it is (as on LangGraph's server). A graph that cannot be
loaded is kept with its error (:func:`planner.registry.failed_graphs`) and does not stop
the others.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import importlib
import importlib.util
import inspect
import json
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.graph import StateGraph
from langgraph.pregel import Pregel

from planner.spec import FieldKind, GraphSpec, InputField

_SCALARS: dict[str, FieldKind] = {"string": "text", "integer": "integer", "number": "number",
                                  "boolean": "boolean"}


class ConfigError(ValueError):
    """The ``langgraph.json`` itself cannot be read (not one of its graphs)."""


def read_config(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """The config file's folder and its parsed content; ``ConfigError`` says what is wrong."""
    file = Path(path).expanduser().resolve()
    try:
        data = json.loads(file.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read {file} ({exc.strerror}); set "
                          "PLANWATCH_LANGGRAPH_CONFIG to your langgraph.json") from None
    except ValueError as exc:
        raise ConfigError(f"{file} is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("graphs"), dict):
        raise ConfigError(f'{file} has no "graphs" object; see '
                          "https://langchain-ai.github.io/langgraph/cloud/reference/cli/")
    return file.parent, data


def load_config(path: str | Path) -> tuple[list[GraphSpec], dict[str, str]]:
    """Every graph of the file as a spec, and the error of each one that failed to load."""
    root, data = read_config(path)
    add_dependencies(root, data)
    specs: list[GraphSpec] = []
    failed: dict[str, str] = {}
    for name, entry in data["graphs"].items():
        try:
            specs.append(graph_spec(name, entry, root=root))
        except Exception as exc:  # any error in the user's module: keep it, go on
            failed[name] = f"{type(exc).__name__}: {exc}"
    return specs, failed


def add_dependencies(root: Path, data: Mapping[str, Any]) -> None:
    """Put the file's local ``"dependencies"`` (``"."``, ``"./src"``) on the import path."""
    for dep in data.get("dependencies") or ():
        if isinstance(dep, str) and not dep.startswith(("git+", "http")) and (
                dep.startswith(".") or dep.startswith("/")):
            folder = str((root / dep).resolve())
            if folder not in sys.path:
                sys.path.insert(0, folder)


def graph_spec(name: str, entry: Any, *, root: Path) -> GraphSpec:
    """The spec of one ``"name": "./file.py:attr"`` (or ``{"path": …}``) entry."""
    budget = None
    if isinstance(entry, Mapping):
        where, description = entry.get("path"), str(entry.get("description") or "")
        budget = entry.get("budget")
        if budget is not None and not isinstance(budget, Mapping):
            raise ConfigError(f"graph {name!r}: \"budget\" is {budget!r}; give an object "
                              'such as {"max_cost_usd": 0.5, "on_limit": "pause"}')
    else:
        where, description = entry, ""
    if not isinstance(where, str) or ":" not in where:
        raise ConfigError(f"graph {name!r}: {where!r} is not 'path/to/file.py:attr' or "
                          "'package.module:attr'")
    target = import_attribute(where, root=root, what=f"graph {name!r}",
                              module_name=f"langgraph_json_{name}")
    builder = _builder(target)
    schema = _input_schema(builder)
    factory = target if callable(target) and not isinstance(target, (StateGraph, Pregel)) \
        else None
    return GraphSpec(
        name=name,
        title=name,
        description=description or f"From {where} (langgraph.json).",
        version=1,
        build=lambda **_ports: builder,
        takes_model=False,
        make_input=pass_through,
        input_fields=input_fields(schema),
        input_schema=schema,
        tags=("langgraph.json",),
        per_run=functools.partial(run_graph, factory) if factory is not None else None,
        budget=budget,
    )


def pass_through(values: Mapping[str, Any]) -> dict[str, Any]:
    """A ``langgraph.json`` graph takes its input as given (fields left empty dropped)."""
    return {key: value for key, value in values.items() if value is not None}


def import_attribute(where: str, *, root: Path, what: str, module_name: str) -> Any:
    """The attribute a langgraph.json entry names: ``./file.py:attr`` (relative to the
    file's folder ``root``, imported as ``module_name``) or ``package.module:attr``;
    ``ConfigError`` names ``what`` (``graph 'agent'``, ``http.app``) and what is missing."""
    module_ref, _, attr = where.rpartition(":")
    if module_ref.endswith(".py") or "/" in module_ref:
        file = (root / module_ref).resolve()
        if not file.is_file():
            raise ConfigError(f"{what}: no file {file}")
        spec = importlib.util.spec_from_file_location(module_name, file)
        if spec is None or spec.loader is None:
            raise ConfigError(f"{what}: cannot import {file}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_ref)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{what}: {module_ref} has no attribute {attr!r}") from None


def _builder(target: Any) -> StateGraph[Any]:
    """The uncompiled graph behind a compiled graph, a StateGraph or a factory."""
    if isinstance(target, StateGraph):
        return target
    if isinstance(target, Pregel):
        builder = getattr(target, "builder", None)
        if isinstance(builder, StateGraph):
            return builder
        raise ConfigError("a compiled graph without its StateGraph builder (a functional "
                          "API entrypoint?) cannot take Planwatch's checkpointer")
    if callable(target):
        made = _await(_aentered(target(**factory_arguments(target))))
        if made is target:
            raise ConfigError("the factory returned itself")
        return _builder(made)
    raise ConfigError(f"{type(target).__name__} is not a graph, a StateGraph or a factory")


@contextlib.asynccontextmanager
async def _entered(made: Any) -> AsyncIterator[Any]:
    """What a factory's call gave, while it is in use: its value, awaited, or what its
    (sync or async) context manager yields, left when the use ends."""
    if inspect.isawaitable(made):
        made = await made
    if isinstance(made, contextlib.AbstractAsyncContextManager):
        async with made as graph:
            yield graph
    elif isinstance(made, contextlib.AbstractContextManager) and not isinstance(
            made, (StateGraph, Pregel)):
        with made as graph:
            yield graph
    else:
        yield made


async def _aentered(made: Any) -> Any:
    """What a factory's call gave, entered and left at once (the graph is only inspected)."""
    async with _entered(made) as graph:
        return graph


@dataclass(frozen=True)
class RunUser:
    """The user who started a run, as a graph factory's ``runtime.user`` (LangGraph's
    ``BaseUser``: ``identity``, ``display_name``, ``permissions``, read as a mapping too)."""

    identity: str
    display_name: str
    permissions: tuple[str, ...] = ()
    is_authenticated: bool = True

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in self.__dataclass_fields__

    def __iter__(self) -> Iterator[str]:
        return iter(self.__dataclass_fields__)


@contextlib.asynccontextmanager
async def run_graph(factory: Any, *, config: Mapping[str, Any], context: Any,
                    user: RunUser | None, store: Any = None) -> AsyncIterator[StateGraph[Any]]:
    """The graph ``factory`` makes for one run, as LangGraph's server calls it for
    ``threads.create_run``: with the run's ``config`` and an execution runtime holding its
    ``context``, ``user`` and ``store``; a context manager's graph is used while it is
    entered."""
    runtime = _server_runtime(context=context, user=user, execution=True, store=store)
    made = factory(**factory_arguments(factory, config=config, runtime=runtime))
    async with _entered(made) as graph:
        yield _builder(graph)


def factory_arguments(factory: Any, *, config: Mapping[str, Any] | None = None,
                      runtime: Any = None) -> dict[str, Any]:
    """What a factory is called with: ``config`` and/or ``runtime``, by name or type (a
    single other parameter is taken to be the config, as LangGraph's server does); by
    default those of an inspection (``assistants.read``)."""
    try:
        params = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):  # a builtin: no signature to read
        return {}
    args: dict[str, Any] = {}
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        hint = str(param.annotation)
        if param.name == "runtime" or "Runtime" in hint:
            args[param.name] = runtime if runtime is not None else _server_runtime()
        elif param.name == "config" or "RunnableConfig" in hint or len(params) == 1:
            args[param.name] = dict(config) if config is not None else {"configurable": {}}
        elif param.default is param.empty:
            raise ConfigError(f"factory parameter {param.name!r} is not 'config' or "
                              "'runtime'; a factory takes a config, the server runtime or both")
    return args


def _server_runtime(*, context: Any = None, user: Any = None, execution: bool = False,
                    store: Any = None) -> Any:
    """The runtime LangGraph's server gives a factory: for ``assistants.read`` (no
    context; an in-memory stand-in store), or for ``threads.create_run`` (``execution``:
    the run's context, user and store)."""
    from langgraph.store.memory import InMemoryStore
    from langgraph_sdk.runtime import _ExecutionRuntime, _ReadRuntime

    if execution:
        return _ExecutionRuntime(access_context="threads.create_run",
                                 store=store if store is not None else InMemoryStore(),
                                 context=context, user=user)
    return _ReadRuntime(access_context="assistants.read", store=InMemoryStore(), user=user)


def _await(awaitable: Any) -> Any:
    """An async factory's graph, whether or not an event loop runs in this thread."""
    async def wait() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, wait()).result()


def _input_schema(builder: StateGraph[Any]) -> dict[str, Any] | None:
    """The graph's input JSON Schema, or None where LangGraph cannot describe it."""
    try:
        schema: dict[str, Any] = builder.compile().get_input_jsonschema()
    except Exception:
        return None
    return schema


def input_fields(schema: Mapping[str, Any] | None) -> tuple[InputField, ...]:
    """Start-form fields from an input JSON Schema (JSON for what a field can't say)."""
    if not schema:
        return ()
    fields = []
    for key, prop in (schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        kind: FieldKind = _SCALARS.get(str(prop.get("type")), "json")
        choices: tuple[str, ...] = ()
        if isinstance(prop.get("enum"), list) and all(isinstance(c, str) for c in prop["enum"]):
            kind, choices = "choice", tuple(prop["enum"])
        fields.append(InputField(
            name=str(key), label=str(prop.get("title") or key), kind=kind,
            # a run's input is a partial state update: nothing is required of the form
            required=False, default=prop.get("default"),
            help=str(prop.get("description") or ("JSON" if kind == "json" else "")),
            choices=choices,
        ))
    return tuple(fields)
