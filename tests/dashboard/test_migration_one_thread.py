"""Migration 0027 carries a database made by the code before it over: each run's own
checkpoint thread (``<run>:planner``) moves into its thread's one checkpoint thread, every
checkpoint naming its run; a fork's copy of a checkpoint of the same thread goes (the
fork's first checkpoint already names the original as its parent); a copy from another
thread's run stays, the root of its thread."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from langgraph.checkpoint.base import empty_checkpoint

from dashboard.checkpoints import checkpoint_list, sync_saver
from dashboard.lgserver import shapes
from dashboard.models import Run, Thread
from tests import graphs  # noqa: F401  (registers test.echo)

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]

BEFORE = [("dashboard", "0026_merge_event_at")]
AFTER = [("dashboard", "0027_one_checkpoint_thread_per_thread")]  # and every migration after


def _migrate(target: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return executor


def _put(saver, thread: str, values: dict, version: int, *, parent: str | None = None,
         checkpoint_id: str | None = None, metadata: dict | None = None) -> str:
    """A root checkpoint of ``thread`` as today's code writes one (no ``run_id``)."""
    checkpoint = empty_checkpoint()
    if checkpoint_id:
        checkpoint["id"] = checkpoint_id
    versions = {name: f"{version:032}.0" for name in values}
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = versions
    conf = {"thread_id": thread, "checkpoint_ns": ""}
    if parent:
        conf["checkpoint_id"] = parent
    saved = saver.put({"configurable": conf}, checkpoint,
                      metadata or {"source": "loop", "step": version}, versions)
    return str(saved["configurable"]["checkpoint_id"])


def test_runs_checkpoints_move_into_their_threads_one_checkpoint_thread():
    _migrate(BEFORE)
    try:
        apps = MigrationExecutor(connection).loader.project_state(BEFORE).apps
        OldThread, OldRun = apps.get_model("dashboard", "Thread"), apps.get_model(
            "dashboard", "Run")
        chat, other = OldThread.objects.create(graph="test.echo"), OldThread.objects.create(
            graph="test.echo")
        first, fork, page_fork = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        held = {run: f"{run}:planner" for run in (first, fork, page_fork)}
        with sync_saver() as saver:
            one = _put(saver, held[first], {"n": 1}, 1)
            two = _put(saver, held[first], {"n": 2}, 2, parent=one)
            saver.put_writes({"configurable": {"thread_id": held[first], "checkpoint_ns": "",
                                               "checkpoint_id": two}}, [("n", 3)], "task-1")
            # the thread's next run went on from ``one``: its copy, then its own checkpoint
            copy = _put(saver, held[fork], {"n": 1}, 1, checkpoint_id=one, metadata={
                "source": "fork", "step": 1,
                "forked_from": {"thread_id": held[first], "checkpoint_id": one}})
            saver.put_writes({"configurable": {"thread_id": held[fork], "checkpoint_ns": "",
                                               "checkpoint_id": copy}}, [("n", 9)], "t-2")
            five = _put(saver, held[fork], {"n": 5}, 3, parent=copy)
            # a fork from the pages into a thread of its own: its copy is its thread's root
            root = _put(saver, held[page_fork], {"n": 2}, 2, checkpoint_id=two, metadata={
                "source": "fork", "step": 2,
                "forked_from": {"thread_id": held[first], "checkpoint_id": two}})
        for run, thread, parent in ((first, chat, None), (fork, chat, first),
                                    (page_fork, other, first)):
            OldRun.objects.create(id=run, graph="test.echo", thread_id=held[run],
                                  conversation_id=thread.id, parent_id=parent,
                                  status="succeeded")
    finally:
        _migrate(AFTER)
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # today's models

    runs = {run.id: run for run in Run.objects.all()}
    assert {runs[first].thread_id, runs[fork].thread_id} == {str(chat.id)}
    assert runs[page_fork].thread_id == str(other.id)
    for run in held.values():
        assert checkpoint_list(thread_id=run) == []
    listed = {view.checkpoint_id: view for view in checkpoint_list(thread_id=str(chat.id))}
    assert set(listed) == {one, two, five}  # the copy went: ``one`` is there once
    assert listed[five].parent_id == one and listed[two].parent_id == one
    assert {cid: view.metadata["run_id"] for cid, view in listed.items()} == {
        one: str(first), two: str(first), five: str(fork)}
    assert [w["value"] for w in listed[two].pending_writes] == [3]
    assert listed[one].pending_writes == []  # the copy's writes went with it
    assert [view.values for view in checkpoint_list(thread_id=str(chat.id),
                                                    run_ids=[str(fork)])] == [{"n": 5}]
    (kept,) = checkpoint_list(thread_id=str(other.id))
    assert (kept.checkpoint_id, kept.parent_id, kept.metadata["run_id"]) == (
        root, None, str(page_fork))
    history = shapes.history(Thread.objects.get(id=chat.id), limit=10)
    assert [state["values"]["n"] for state in history] == [5, 2, 1]
