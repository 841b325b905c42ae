"""The sync saver's writes on SQLite belong to Django's atomic block, if one is open.

A run request decides under the thread's lock (``thread_runs.locked``, an IMMEDIATE
transaction on SQLite) and writes a resume's ``Command(update=…)`` there: the saver must
not commit Django's connection in the middle of the decision, so what it wrote commits,
or rolls back, with the decision.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from langgraph._internal._constants import NULL_TASK_ID

from dashboard.checkpoints import sync_saver

pytestmark = [pytest.mark.django_db(transaction=True)]

CONFIG = {"configurable": {"thread_id": "a-thread", "checkpoint_ns": "",
                           "checkpoint_id": "a-checkpoint"}}


def written() -> int:
    """How many pending writes the checkpoint has."""
    with sync_saver() as saver:
        count = saver.conn.execute(
            "SELECT count(*) FROM writes WHERE thread_id = 'a-thread'").fetchone()[0]
    return int(count)


@pytest.fixture(autouse=True)
def sqlite_only() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL's saver is on a connection of its own (the read pool)")


def test_a_write_in_an_atomic_block_rolls_back_with_it():
    with pytest.raises(RuntimeError), transaction.atomic():
        with sync_saver() as saver:
            saver.put_writes(CONFIG, [("item", "desk")], NULL_TASK_ID)
        raise RuntimeError("the decision failed after the write")
    assert written() == 0


def test_a_write_in_an_atomic_block_commits_with_it_and_one_outside_at_once():
    with transaction.atomic():
        with sync_saver() as saver:
            saver.put_writes(CONFIG, [("item", "desk")], NULL_TASK_ID)
        assert connection.in_atomic_block  # the block still holds its transaction
    assert written() == 1
    with sync_saver() as saver:
        saver.put_writes(CONFIG, [("item", "desk"), ("quantity", 2)], NULL_TASK_ID)
    assert written() == 2
