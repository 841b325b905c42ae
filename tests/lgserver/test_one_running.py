"""At most one running run per thread under any race, for every multitask strategy.

Twenty run requests at once, on real connections to two daphnes sharing the database,
hit one busy thread; a sampler reads the thread's running runs all the while. The
database holds the rule (``run_one_running_per_thread``), so no interleaving of requests
and executors' claims can break it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection

from dashboard.models import Run
from tests.conftest import api_token, served, wait_run

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True), pytest.mark.reliability,
              pytest.mark.server]

REQUESTS = 20


@pytest.fixture(scope="module")
def second_lg_url(django_db_setup, django_db_blocker, langgraph_json) -> Iterator[str]:
    """A second daphne on the same database: requests decide in two processes at once."""
    with served(django_db_blocker, PLANWATCH_LANGGRAPH_CONFIG=str(langgraph_json),
                PLANWATCH_THINK_TIME="0.01") as url:
        yield f"{url}/langgraph"


class Sampler(threading.Thread):
    """Counts the thread's running runs, over and over, on a connection of its own."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(daemon=True)
        self.thread_id = thread_id
        self.most = 0
        self.samples = 0
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while not self.done.is_set():
                running = Run.objects.filter(conversation_id=self.thread_id,
                                             status="running").count()
                self.most = max(self.most, running)
                self.samples += 1
                time.sleep(0.002)
        finally:
            connection.close()


def settle(thread_id: str, timeout: float = 120) -> None:
    """Wait until no run of the thread executes or waits to (a deadlock guard)."""
    deadline = time.monotonic() + timeout
    while Run.objects.filter(conversation_id=thread_id, status__in=("queued", "running")
                             ).exists():
        assert time.monotonic() < deadline, list(
            Run.objects.filter(conversation_id=thread_id).values_list("status", flat=True))
        time.sleep(0.05)


@pytest.mark.parametrize("strategy", ["reject", "enqueue", "interrupt", "rollback"])
def test_twenty_concurrent_requests_on_a_busy_thread_never_run_two_at_once(
        strategy, lg_url, second_lg_url, sdk_user):
    token = api_token(sdk_user)
    headers = {"x-api-key": token}
    thread_id = httpx.post(f"{lg_url}/threads", json={}, headers=headers).json()["thread_id"]
    busy = httpx.post(f"{lg_url}/threads/{thread_id}/runs", headers=headers,
                      json={"assistant_id": "slow", "input": {"limit": 40}}).json()
    wait_run(busy["run_id"], statuses=("running",))

    sampler = Sampler(thread_id)
    sampler.start()
    start = threading.Barrier(REQUESTS)

    def ask(i: int) -> httpx.Response:
        base = lg_url if i % 2 else second_lg_url
        with httpx.Client(headers=headers, timeout=60) as client:  # a connection of its own
            start.wait()
            return client.post(f"{base}/threads/{thread_id}/runs", json={
                "assistant_id": "slow", "input": {"limit": 2}, "multitask_strategy": strategy})

    with ThreadPoolExecutor(REQUESTS) as pool:
        answers = list(pool.map(ask, range(REQUESTS)))
    if strategy in ("reject", "enqueue"):  # the busy run (4 s) need not end by itself
        httpx.post(f"{lg_url}/threads/{thread_id}/runs/{busy['run_id']}/cancel",
                   headers=headers)
    try:
        settle(thread_id)
    finally:
        sampler.done.set()
        sampler.join()

    codes = sorted(a.status_code for a in answers)
    assert all(code < 500 for code in codes), [a.text for a in answers if a.status_code >= 500]
    assert sampler.samples > 20
    assert sampler.most == 1, f"{sampler.most} runs of one thread were running at once"
    if strategy == "reject":
        assert set(codes) == {409}  # the busy run went on alone
    else:
        assert set(codes) == {200}
    runs = Run.objects.filter(conversation_id=thread_id)
    if strategy == "enqueue":  # every one ran, one after another
        # the busy run ended by itself or by the cancel above, whichever came first
        assert runs.exclude(id=busy["run_id"]).filter(
            state=Run.State.SUCCEEDED).count() == REQUESTS
    elif strategy in ("interrupt", "rollback"):  # the last one ran to its end
        assert runs.order_by("-created_at").first().status == Run.Status.SUCCEEDED
        assert runs.filter(state=Run.State.FAILED).count() == 0
