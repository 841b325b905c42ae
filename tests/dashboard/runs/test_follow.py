"""Followers' quiet-spell looks: read together, one query for every run asked meanwhile."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from asgiref.sync import async_to_sync

from dashboard.models import Run
from dashboard.runs import follow

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


def test_the_looks_of_many_followers_are_one_query(monkeypatch):
    runs = [Run.objects.create(graph="test.echo", thread_id=f"look-{n}:planner", last_seq=n,
                               status=Run.Status.RUNNING) for n in range(5)]
    gone = str(uuid.uuid4())  # a run deleted meanwhile: its followers hear None
    reads: list[list[str]] = []
    read = follow._acursors

    async def counted(run_ids: list[str]) -> dict[str, tuple[int, str]]:
        reads.append(sorted(run_ids))
        return await read(run_ids)

    monkeypatch.setattr(follow, "_acursors", counted)

    async def scenario() -> list[tuple[int, str] | None]:
        # two followers of each run (a page and an SDK stream), all quiet at once
        asked = [str(r.id) for r in runs for _ in range(2)] + [gone]
        return await asyncio.gather(*(follow.acursor(run_id) for run_id in asked))

    seen = async_to_sync(scenario)()
    assert seen == [(n, "running") for n in range(5) for _ in range(2)] + [None]
    assert reads == [sorted([str(r.id) for r in runs] + [gone])]  # one query for all
