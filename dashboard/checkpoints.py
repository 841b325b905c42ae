"""Reads of LangGraph checkpoints through the saver's own read path (and serializer).

The savers decode their own rows: ``PostgresSaver`` (jsonb + blobs) on a connection of
this process's read pool (Django's connections load jsonb as text and its client-side
cursors cannot read the saver's binary results), ``SqliteSaver`` (msgpack BLOBs) on
Django's own connection. The only write through them
is LangGraph's own ``update_state`` (``services.run_update_state``), which adds a
checkpoint and never changes one; deletes (a thread's, a run's) are here too.

A thread is one checkpoint thread under the thread's id; a LangGraph run's checkpoints
are those whose metadata names it (``run_id``, as LangGraph's server writes it), and a
``Run``'s those of its LangGraph runs (:meth:`~dashboard.models.Run.langgraph_run_ids`).
"""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.db import connection
from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import INTERRUPT, NULL_TASK_ID, RESUME
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from config.connections import CHECKPOINT_READ_POOL_SIZE
from dashboard.runs.jsonsafe import to_jsonable
from dashboard.runs.savers import postgres_conninfo
from planner.registry import get_graph

if TYPE_CHECKING:
    from dashboard.models import Run


@dataclass(frozen=True)
class CheckpointView:
    """One checkpoint, decoded into plain JSON data."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    created_at: str
    step: int | None
    source: str | None
    values: dict[str, Any]
    metadata: dict[str, Any]
    pending_writes: list[dict[str, Any]] = field(default_factory=list)


READ_POOL_SIZE = CHECKPOINT_READ_POOL_SIZE
"""PostgreSQL connections a process keeps for checkpoint reads (each read holds one for a
statement or two; a stream reads a checkpoint when a step ends)."""

_read_pools: dict[str, Any] = {}
_read_pools_lock = threading.Lock()


def _read_pool() -> Any:
    """This process's pool for the saver's reads on the current database (opened once;
    a connection per read, measured, reached PostgreSQL's max_connections with 300
    streams)."""
    conninfo = postgres_conninfo()
    with _read_pools_lock:
        pool = _read_pools.get(conninfo)
        if pool is None:
            from psycopg.rows import dict_row
            from psycopg_pool import ConnectionPool

            from config import pgpool

            pool = ConnectionPool(
                conninfo, min_size=1, max_size=READ_POOL_SIZE, timeout=30, check=pgpool.check,
                kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
                name="checkpoint-reads", open=True)
            _read_pools[conninfo] = pool
    return pool


def check_read_pools() -> None:
    """Have each read pool test its idle connections (after one was found dropped)."""
    with _read_pools_lock:
        pools = list(_read_pools.values())
    for pool in pools:
        pool.check()


def close_read_pools() -> None:
    """Close the read pools (before the database they read is dropped, as in tests)."""
    with _read_pools_lock:
        pools = list(_read_pools.values())
        _read_pools.clear()
    for pool in pools:
        pool.close()


@functools.cache
def _django_sqlite_saver() -> type:
    """``SqliteSaver`` on Django's connection, leaving the commit to Django's atomic block
    when one is open (a run request's decision, :func:`dashboard.thread_runs.locked`): its
    writes then commit, or roll back, with the block, which keeps the write lock."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    class DjangoSqliteSaver(SqliteSaver):
        @contextmanager
        def cursor(self, transaction: bool = True) -> Iterator[Any]:
            with super().cursor(transaction and not connection.in_atomic_block) as cur:
                yield cur

    return DjangoSqliteSaver


@contextmanager
def sync_saver() -> Iterator[BaseCheckpointSaver]:
    """The database's own sync saver (reads and update_state): on PostgreSQL on a
    connection of the read pool (its writes commit at once), on SQLite on Django's
    connection (its writes commit with Django's atomic block, if one is open)."""
    if connection.vendor == "postgresql":
        from langgraph.checkpoint.postgres import PostgresSaver

        with _read_pool().connection() as conn:
            yield PostgresSaver(conn)
    else:
        connection.ensure_connection()
        saver = _django_sqlite_saver()(connection.connection)
        saver.is_setup = True  # the tables come from a migration; never run DDL on a read
        yield saver


def compiled(name: str) -> Any:
    """The graph ``name`` compiled once per process, with no checkpointer (reads only)."""
    return get_graph(name).inspection_graph


@contextmanager
def graph_for(name: str) -> Iterator[Any]:
    """The graph ``name`` compiled once per process, here on the database's sync saver."""
    with sync_saver() as saver:
        yield compiled(name).copy(update={"checkpointer": saver})


def config_of(run: Run, checkpoint_id: str | None = None, *, naming: str = ""
              ) -> RunnableConfig:
    """The LangGraph config of ``run``'s thread (its newest checkpoint, or at a
    checkpoint, if given); a checkpoint written with it names the LangGraph run
    ``naming`` (``run_id``; the run's own id by default)."""
    configurable: dict[str, Any] = {"thread_id": run.thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable, "metadata": {"run_id": naming or str(run.id)}}


def _is_internal(channel: str) -> bool:
    """LangGraph's own bookkeeping channels (branch triggers, ``__start__`` …)."""
    return channel.startswith(("branch:", "__")) or ":" in channel


def _view(tup: CheckpointTuple) -> CheckpointView:
    conf = tup.config["configurable"]
    parent = (tup.parent_config or {}).get("configurable", {})
    metadata = to_jsonable(dict(tup.metadata or {}))
    return CheckpointView(
        thread_id=conf["thread_id"],
        checkpoint_ns=conf.get("checkpoint_ns", ""),
        checkpoint_id=conf["checkpoint_id"],
        parent_id=parent.get("checkpoint_id"),
        created_at=tup.checkpoint.get("ts", ""),
        step=metadata.get("step"),
        source=metadata.get("source"),
        values=to_jsonable({
            k: v for k, v in (tup.checkpoint.get("channel_values") or {}).items()
            if not _is_internal(k)
        }),
        metadata=metadata,
        pending_writes=[
            {"task_id": task_id, "channel": channel, "value": to_jsonable(value)}
            for task_id, channel, value in (tup.pending_writes or ())
        ],
    )


def checkpoint_get(*, thread_id: str, checkpoint_id: str | None = None,
                   checkpoint_ns: str = "") -> CheckpointView | None:
    """One checkpoint of a thread (the latest when ``checkpoint_id`` is None)."""
    configurable = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    with sync_saver() as saver:
        tup = saver.get_tuple({"configurable": configurable})
    return _view(tup) if tup else None


def checkpoint_with_parent(*, thread_id: str, checkpoint_id: str, checkpoint_ns: str = ""
                           ) -> tuple[CheckpointView | None, CheckpointView | None]:
    """A checkpoint and its parent, read on one saver connection."""
    with sync_saver() as saver:
        conf = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
        tup = saver.get_tuple({"configurable": {**conf, "checkpoint_id": checkpoint_id}})
        parent_id = ((tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
                     if tup else None)
        parent = saver.get_tuple({"configurable": {**conf, "checkpoint_id": parent_id}}
                                 ) if parent_id else None
    return (_view(tup) if tup else None), (_view(parent) if parent else None)


def checkpoint_list(*, thread_id: str, checkpoint_ns: str = "", limit: int = 100,
                    run_ids: Sequence[str] = ()) -> list[CheckpointView]:
    """A thread's checkpoints in one namespace, newest first (those of the LangGraph runs
    ``run_ids``, if given: the ones whose metadata names one of them; a ``Run``'s are its
    :meth:`~dashboard.models.Run.langgraph_run_ids`)."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id,
                                               "checkpoint_ns": checkpoint_ns}}
    with sync_saver() as saver:
        if not run_ids:
            return [_view(t) for t in saver.list(config, limit=limit)]
        found = [_view(t) for run_id in run_ids
                 for t in saver.list(config, limit=limit, filter={"run_id": run_id})]
    # checkpoint ids are time-ordered (uuid6), as the saver orders them
    return sorted(found, key=lambda view: view.checkpoint_id, reverse=True)[:limit]


def run_checkpoint(run: Run) -> CheckpointView | None:
    """The run's newest root checkpoint, as the saver has it (None before it wrote one):
    the newest of the latest of its LangGraph runs that wrote one."""
    for run_id in run.langgraph_run_ids():
        found = checkpoint_list(thread_id=run.thread_id, limit=1, run_ids=[run_id])
        if found:
            return found[0]
    return None


def values_diff(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """What changed from ``before`` to ``after``: added, removed and changed paths."""
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[dict[str, Any]] = []
        for key in sorted(set(before) | set(after), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in before:
                changes.append({"path": sub, "op": "added", "after": after[key]})
            elif key not in after:
                changes.append({"path": sub, "op": "removed", "before": before[key]})
            else:
                changes.extend(values_diff(before[key], after[key], sub))
        return changes
    if isinstance(before, list) and isinstance(after, list) and after[: len(before)] == before:
        added = after[len(before):]  # append-only logs: show only what was appended
        return [{"path": path, "op": "appended", "after": added}] if added else []
    if before != after:
        return [{"path": path, "op": "changed", "before": before, "after": after}]
    return []


# Uuid6 timestamps count 100 ns intervals from the Gregorian epoch (1582-10-15).
_GREGORIAN_TO_UNIX = 0x01B21DD213814000


def checkpoint_time(checkpoint_id: str) -> datetime | None:
    """When a checkpoint was taken, read from its time-ordered uuid6 id (no decoding)."""
    try:
        value = uuid.UUID(checkpoint_id).int
    except (TypeError, ValueError):
        return None
    ticks = ((value >> 80) << 12) | ((value >> 64) & 0x0FFF)
    return datetime.fromtimestamp((ticks - _GREGORIAN_TO_UNIX) / 1e7, tz=UTC)


def _writes_table() -> str:
    return "checkpoint_writes" if connection.vendor == "postgresql" else "writes"


def task_node(task_path: str) -> str:
    """The node a write's task ran (``~__pregel_pull, step`` → ``step``); pushes stay as is."""
    kind, _, rest = task_path.partition(", ")
    return rest.split(", ")[0] if kind == "~__pregel_pull" and rest else task_path


Key = tuple[str, str, str]  # (thread_id, checkpoint_ns, checkpoint_id)


def checkpoint_writers(*, keys: list[Key]) -> dict[Key, list[str]]:
    """The nodes of the writes stored against each (thread, namespace, checkpoint id)."""
    if not keys:
        return {}
    threads = sorted({k[0] for k in keys})
    ids = sorted({k[2] for k in keys})
    marks = ", ".join
    sql = (
        f"SELECT DISTINCT thread_id, checkpoint_ns, checkpoint_id, task_path "
        f"FROM {_writes_table()} WHERE thread_id IN ({marks(['%s'] * len(threads))}) "
        f"AND checkpoint_id IN ({marks(['%s'] * len(ids))})"
    )
    wanted = set(keys)
    found: dict[Key, set[str]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, [*threads, *ids])
        for thread_id, ns, checkpoint_id, task_path in cursor.fetchall():
            key = (thread_id, ns, checkpoint_id)
            if key in wanted and task_path:
                found.setdefault(key, set()).add(task_node(task_path))
    return {key: sorted(nodes) for key, nodes in found.items()}


def checkpoints_delete(*, threads: Sequence[str] = (), runs: Sequence[tuple[str, str]] = ()
                       ) -> None:
    """Remove LangGraph's checkpoints (and their writes) of whole checkpoint ``threads``,
    and of ``runs`` (``(checkpoint thread, LangGraph run id)``: the checkpoints naming it;
    a ``Run``'s are one pair per LangGraph run of it; the
    PostgreSQL saver's channel blobs stay, as later checkpoints of the thread may share
    them)."""
    with sync_saver() as saver:
        for thread_id in threads:
            saver.delete_thread(thread_id)
    if not runs:
        return
    if connection.vendor == "postgresql":
        names = "checkpoint_writes", "metadata->>'run_id' = %s"
    else:
        names = "writes", "json_extract(CAST(metadata AS TEXT), '$.run_id') = %s"
    writes, of_run = names
    with connection.cursor() as cursor:
        for thread_id, run_id in runs:
            cursor.execute(
                f"DELETE FROM {writes} WHERE thread_id = %s AND checkpoint_id IN (SELECT "
                f"checkpoint_id FROM checkpoints WHERE thread_id = %s AND {of_run})",
                [thread_id, thread_id, run_id])
            cursor.execute(f"DELETE FROM checkpoints WHERE thread_id = %s AND {of_run}",
                           [thread_id, run_id])


def langgraph_run_undo(*, thread_id: str, undone: str, before: Sequence[str],
                       continued: bool) -> set[str]:
    """Undo the LangGraph run ``undone`` on its checkpoint thread, on Django's connection
    (in the caller's transaction): the checkpoints naming it go (:func:`checkpoints_delete`),
    and so do the writes it left on the checkpoint it went on from (the newest naming the
    latest of ``before``, the LangGraph runs before it, that wrote one: where LangGraph
    keeps a resumed step's writes), so the thread's state is again what it was before it:
    its answers (``__resume__``) and the writes of the tasks it ran there (a resume: the
    tasks that had asked; a continue, ``continued``: any task's). What a state update
    wrote there (no task's) stays. Returns the ids of the questions waiting at that
    checkpoint (those it took up: open again). A subgraph's checkpoint it went on from
    keeps the writes the run left there."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    waited = None
    with sync_saver() as saver:
        for run_id in before:
            found = list(saver.list(config, limit=1, filter={"run_id": run_id}))
            if found:
                waited = found[0]
                break
    checkpoints_delete(runs=[(thread_id, undone)])
    if waited is None:
        return set()
    asked = {task_id: value for task_id, channel, value in waited.pending_writes or ()
             if channel == INTERRUPT}
    tasks = ("AND task_id <> %s", [NULL_TASK_ID]) if continued else (
        f"AND task_id IN ({', '.join(['%s'] * len(asked))})" if asked else "AND 1 = 0",
        list(asked))
    of_checkpoint = "thread_id = %s AND checkpoint_ns = '' AND checkpoint_id = %s"
    key = [thread_id, waited.config["configurable"]["checkpoint_id"]]
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {_writes_table()} WHERE {of_checkpoint} AND (channel = "
                       f"%s OR (channel <> %s {tasks[0]}))",
                       [*key, RESUME, INTERRUPT, *tasks[1]])
    return {str(getattr(one, "id", "")) for value in asked.values()
            for one in (value if isinstance(value, list | tuple) else [value])} - {""}
