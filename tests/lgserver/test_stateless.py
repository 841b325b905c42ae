"""Stateless runs (``/runs``, ``/runs/stream``, ``/runs/wait``) through the official SDK,
as LangGraph's server runs them: on a temporary thread, deleted once the run stops unless
``on_completion="keep"``."""

from __future__ import annotations

import time

import httpx
import pytest
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from dashboard.models import Run, Thread
from tests.conftest import api_token

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


def gone(thread_id: str, deadline: float = 30) -> bool:
    """Whether the thread is deleted within ``deadline`` seconds (a background run's)."""
    end = time.monotonic() + deadline
    while Thread.objects.filter(id=thread_id).exists():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def test_a_stateless_wait_answers_and_leaves_no_thread(sdk, lg_url, sdk_user):
    response = httpx.post(f"{lg_url}/runs/wait", timeout=30,
                          json={"assistant_id": "nap", "input": {"seconds": 0}},
                          headers={"x-api-key": api_token(sdk_user)})
    assert response.status_code == 200 and response.json() == {"seconds": 0, "done": True}
    _, _, thread_id, _, run_id = response.headers["Content-Location"].split("/")
    with pytest.raises(NotFoundError):
        sdk.threads.get(thread_id)
    assert not Run.objects.filter(id=run_id).exists()  # its run and log went with it
    assert sdk.runs.wait(None, "nap", input={"seconds": 0}) == {"seconds": 0, "done": True}


def test_a_stateless_stream_leaves_no_thread(sdk):
    before = Thread.objects.count()
    parts = list(sdk.runs.stream(None, "nap", input={"seconds": 0}))
    assert parts[-2].data == {"seconds": 0, "done": True}
    assert parts[-1].data == {"run_id": parts[0].data["run_id"], "status": "success"}
    assert not Run.objects.filter(id=parts[0].data["run_id"]).exists()
    assert Thread.objects.count() == before


def test_on_completion_keep_keeps_the_thread_and_its_state(sdk):
    parts = list(sdk.runs.stream(None, "nap", input={"seconds": 0}, on_completion="keep"))
    run = Run.objects.get(id=parts[0].data["run_id"])
    thread_id = str(run.conversation_id)
    assert sdk.threads.get_state(thread_id)["values"] == {"seconds": 0, "done": True}
    assert [r["run_id"] for r in sdk.runs.list(thread_id)] == [str(run.id)]


def test_a_background_stateless_run_deletes_its_thread_when_it_stops(sdk):
    run = sdk.runs.create(None, "nap", input={"seconds": 0.3})
    assert Thread.objects.filter(id=run["thread_id"]).exists()  # while it runs
    assert gone(run["thread_id"])
    kept = sdk.runs.create(None, "nap", input={"seconds": 0}, on_completion="keep")
    assert sdk.runs.join(kept["thread_id"], kept["run_id"]) == {"seconds": 0, "done": True}
    assert Thread.objects.filter(id=kept["thread_id"]).exists()


def test_an_unknown_on_completion_is_422_naming_it_and_starts_nothing(sdk):
    runs = Run.objects.count()
    with pytest.raises(UnprocessableEntityError, match="on_completion"):
        sdk.runs.create(None, "nap", input={}, on_completion="forget")
    with pytest.raises(UnprocessableEntityError, match="on_completion"):
        list(sdk.runs.stream(None, "nap", input={}, on_completion="forget"))
    with pytest.raises(httpx.HTTPStatusError, match="on_completion"):  # wait raises httpx's
        sdk.runs.wait(None, "nap", input={}, on_completion="forget")
    assert Run.objects.count() == runs
