"""Debugging a run: breakpoints, and forks that start from a past checkpoint, maybe edited.

Breakpoints name the graph's nodes (LangGraph's ``interrupt_before`` / ``interrupt_after``,
``*`` for every node); :func:`check_breakpoints` refuses names the graph lacks.

A fork of the same thread is a branch of its checkpoint thread: it goes on from the past
checkpoint itself. A fork into another thread (made from the pages) gets the parent's
checkpoint copied in as it is (values, versions, pending writes), as the new thread's
root. The edit, if any, is applied with LangGraph's own ``update_state(…, as_node=…)``:
the graph then goes on from there exactly as it would have from the parent's checkpoint.
Edits are checked against the graph's state schema before anything is written.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from pydantic import TypeAdapter, ValidationError

from dashboard.runs.savers import aopen_saver
from planner.spec import GraphSpec, StateField


class EditError(ValueError):
    """A breakpoint or an edit names what the graph lacks, or gives a value of a wrong type."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


def state_channels(builder: StateGraph[Any]) -> dict[str, Any]:
    """The graph's state channels and their declared types."""
    return typing.get_type_hints(builder.state_schema)


def update_nodes(builder: StateGraph[Any]) -> set[str]:
    """The nodes a state update may be written as: the graph's, and ``__start__`` (the
    graph's input, as LangGraph's compiled graph has it: the update is then taken as the
    run's input, and the graph goes on to the nodes after the start)."""
    return set(builder.nodes) | {START}


def check_edit(builder: StateGraph[Any], values: Any, *, as_node: str = "",
               fields: Mapping[str, tuple[StateField, ...]] | None = None) -> None:
    """Raise :class:`EditError` naming each unknown channel, each value of a wrong type and
    each bad value of a declared field (``values.market.price``: the graph's
    ``GraphSpec.state_fields``, checked as its questions and start form check them)."""
    if not isinstance(values, Mapping) or not values:
        raise EditError({"values": "give an object of channel names and their new values, "
                                   'for example {"price": 40}'})
    channels = state_channels(builder)
    errors: dict[str, str] = {}
    for name, value in values.items():
        if name not in channels:
            errors[name] = (f"the graph has no channel {name!r}; its channels: "
                            f"{', '.join(sorted(channels))}")
            continue
        try:
            TypeAdapter(channels[name]).validate_python(value, strict=False)
        except ValidationError as exc:
            first = exc.errors()[0]
            errors[name] = f"{value!r} does not fit {_type_name(channels[name])}: {first['msg']}"
        except Exception:  # a type pydantic cannot check (a user's class): take it as it is
            continue
    for channel, record in values.items():
        if channel in errors or not isinstance(record, Mapping):
            continue
        for name, reason in field_errors(record, (fields or {}).get(channel, ())).items():
            errors[f"{channel}.{name}"] = reason
    nodes = update_nodes(builder)
    if as_node and as_node not in nodes:
        errors["as_node"] = (f"the graph has no node {as_node!r}; its nodes: "
                             f"{', '.join(sorted(nodes))}")
    if errors:
        raise EditError(errors)


def field_errors(record: Mapping[str, Any], fields: tuple[StateField, ...]) -> dict[str, str]:
    """What is wrong with ``record``'s declared fields, by field (None clears a field)."""
    errors: dict[str, str] = {}
    for spec in fields:
        if record.get(spec.name) is not None:
            _, reason = spec.check(record[spec.name])
            if reason:
                errors[spec.name] = reason
    return errors


def typed_edit(values: Mapping[str, Any], fields: Mapping[str, tuple[StateField, ...]]
               ) -> dict[str, Any]:
    """A checked edit with each declared field as its check keeps it (``"47.5"`` → 47.5)."""
    out = dict(values)
    for channel, specs in fields.items():
        record = out.get(channel)
        if not isinstance(record, Mapping):
            continue
        typed = dict(record)
        for spec in specs:
            if typed.get(spec.name) is not None:
                value, reason = spec.check(typed[spec.name])
                if reason is None:
                    typed[spec.name] = value
        out[channel] = typed
    return out


def check_as_node(builder: StateGraph[Any], as_node: str) -> None:
    """Raise :class:`EditError` unless ``as_node`` is one of :func:`update_nodes`, ``__end__``
    (the graph ends there: LangGraph's way to close a thread) or empty."""
    nodes = update_nodes(builder)
    if as_node and as_node not in nodes | {END}:
        raise EditError({"as_node": f"the graph has no node {as_node!r}; its nodes: "
                                    f"{', '.join(sorted(nodes | {END}))}"})


def check_breakpoints(builder: StateGraph[Any], *, before: Any, after: Any) -> None:
    """Raise :class:`EditError` unless both are lists of the graph's node names (or ``*``)."""
    nodes = set(builder.nodes)
    errors: dict[str, str] = {}
    for field, names in (("interrupt_before", before), ("interrupt_after", after)):
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            errors[field] = 'give a list of node names, for example ["decide"], or ["*"]'
            continue
        unknown = sorted(set(names) - nodes - {"*"})
        if unknown:
            errors[field] = (f"the graph has no node {', '.join(map(repr, unknown))}; its "
                             f"nodes: {', '.join(sorted(nodes))}")
    if errors:
        raise EditError(errors)


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


async def acopy_checkpoint(saver: Any, *, source_thread: str, checkpoint_id: str,
                           target_thread: str, run_id: str) -> RunnableConfig:
    """Copy one root checkpoint (with its pending writes) into ``target_thread``, as the
    checkpoint of run ``run_id`` there."""
    source: RunnableConfig = {"configurable": {
        "thread_id": source_thread, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
    found = await saver.aget_tuple(source)
    if found is None:
        raise LookupError(f"no checkpoint {checkpoint_id!r} in thread {source_thread!r}")
    target: RunnableConfig = {"configurable": {"thread_id": target_thread, "checkpoint_ns": ""}}
    metadata = {**(found.metadata or {}), "source": "fork", "run_id": run_id,
                "forked_from": {"thread_id": source_thread, "checkpoint_id": checkpoint_id}}
    saved: RunnableConfig = await saver.aput(
        target, found.checkpoint, metadata, found.checkpoint.get("channel_versions", {}))
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in found.pending_writes or ():
        by_task.setdefault(task_id, []).append((channel, value))
    for task_id, writes in by_task.items():
        await saver.aput_writes(saved, writes, task_id)
    return saved


async def aapply_edit(graph: Any, config: RunnableConfig, values: Mapping[str, Any] | None, *,
                      as_node: str, spec: GraphSpec) -> RunnableConfig:
    """Write an operator's (checked) edit with LangGraph's ``update_state``, together with
    what the graph's ``on_state_edit`` adds to keep its own record true."""
    if values is None:  # as_node ran and wrote nothing (Agent Inbox ends a thread so)
        ended: RunnableConfig = await graph.aupdate_state(config, None, as_node=as_node or None)
        return ended
    before = await graph.aget_state(config)
    extra = spec.on_state_edit(before.values or {}, values)
    saved: RunnableConfig = await graph.aupdate_state(config, {**values, **extra},
                                                      as_node=as_node or None)
    return saved


async def aupdate_state(graph: Any, config: RunnableConfig, values: Mapping[str, Any] | None,
                        *, as_node: str, spec: GraphSpec) -> tuple[RunnableConfig, Any]:
    """:func:`aapply_edit` on ``graph`` (compiled, without a checkpointer) with a saver of
    its own, opened and closed here: async, as graphs with async routes need.

    Returns the new checkpoint's config and the state there.
    """
    handle = await aopen_saver(pool_size=1)
    try:
        graph = graph.copy(update={"checkpointer": handle.saver})
        saved = await aapply_edit(graph, config, values, as_node=as_node, spec=spec)
        return saved, await graph.aget_state(saved)
    finally:
        await handle.aclose()
