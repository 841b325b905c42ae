"""A query compiled once (``dashboard.compiled``): the ORM compiles it on its first call,
and each later call asks the same question of another row."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection

from dashboard.compiled import compiled_once
from dashboard.models import Run, Thread

pytestmark = [pytest.mark.pg, pytest.mark.both, pytest.mark.django_db]


def test_the_orm_compiles_it_once_and_each_call_asks_of_its_own_row():
    built: list[uuid.UUID] = []

    @compiled_once
    def graph_of(run_id: uuid.UUID):
        built.append(run_id)
        return Run.objects.filter(id=run_id, state__in=["queued", "running"]).values_list(
            "graph", flat=True)

    thread = Thread.objects.create(id=uuid.uuid4())
    runs = {graph: Run.objects.create(graph=graph, thread_id=str(thread.id),
                                      conversation=thread, state="queued").id
            for graph in ("acquisition", "decomposition")}

    def asked(pk):
        with connection.cursor() as cursor:
            cursor.execute(*graph_of(pk))
            return cursor.fetchall()

    for graph, run_id in runs.items():
        for pk in (run_id, str(run_id)):
            assert asked(pk) == [(graph,)]
    assert asked(uuid.uuid4()) == []
    assert len(built) == 1 and built[0] not in runs.values()


def test_a_query_that_does_not_take_its_id_is_refused():
    @compiled_once
    def every_run(run_id: uuid.UUID):
        return Run.objects.filter(state="queued")

    with pytest.raises(AssertionError, match="does not take its id"):
        every_run(uuid.uuid4())
