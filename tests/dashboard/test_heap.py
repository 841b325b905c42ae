"""A served process and a worker freeze what they loaded before they take work
(``dashboard.heap``): no collection walks it again."""

from __future__ import annotations

import gc
import sys

import pytest
from django.core.management import call_command
from django.urls import get_resolver

from dashboard import heap
from dashboard.web import serving


@pytest.fixture
def thawed():
    """The test process's heap unfrozen before and after (freezing is for good)."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_settle_collects_and_freezes_what_the_process_holds(thawed):
    assert gc.get_freeze_count() == 0
    held = [[index] for index in range(1000)]  # tracked containers, alive
    frozen = heap.settle()
    assert frozen == gc.get_freeze_count() >= len(held)
    assert gc.get_count()[0] < 100  # the young generation was emptied into the frozen one


def test_a_served_process_loads_its_views_and_settles_before_daphne_serves(thawed,
                                                                          monkeypatch):
    seen: dict[str, object] = {}

    def run(self, args):  # daphne: what the process holds when it starts serving
        seen["frozen"] = gc.get_freeze_count()
        seen["application"] = "config.asgi" in sys.modules
        seen["views"] = get_resolver().__dict__.get("url_patterns") is not None
        seen["args"] = args

    monkeypatch.setattr(serving.DrainingCommandLine, "run", run)
    monkeypatch.setattr(serving, "duties_start", lambda: None)
    monkeypatch.setattr(serving.dispatch, "drain_executor", lambda grace: 0)
    monkeypatch.delenv(serving.READY_FILE, raising=False)
    serving.serve_here(port=0)
    assert seen["frozen"] > 0
    assert seen["application"] and seen["views"]
    assert seen["args"][-1] == serving.APPLICATION == "config.asgi:application"


def test_the_worker_settles_before_it_takes_jobs(thawed, monkeypatch, settings):
    from dashboard.runs import jobs

    monkeypatch.setitem(settings.PLANWATCH, "EXECUTOR", "procrastinate")
    seen: dict[str, int] = {}

    async def arun_worker(*, concurrency: int) -> None:
        seen["frozen"] = gc.get_freeze_count()

    monkeypatch.setattr(jobs, "arun_worker", arun_worker)
    call_command("planwatch_worker")
    assert seen["frozen"] > 0
