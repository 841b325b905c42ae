"""The README's table of run request fields LangGraph's server takes and Planwatch does not
act on, held to the code: every row is read from the README and sent, as the table's
``sent as`` says, to every door a run request comes in by; a row the table says is
refused must be a 422 naming its field, with no run made; one accepted and ignored must
start its run as a request without it would. A field of LangGraph's run request shapes
that is neither declared by Planwatch's shape nor a row of the table fails the build.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from dashboard.lgserver import bodies
from dashboard.models import Interrupt, LangGraphRun, Run
from tests.conftest import api_token, wait_run

README = Path(__file__).resolve().parents[2] / "README.md"
HEADER = "| field | sent as | LangGraph's server | Planwatch |"

LANGGRAPH_FIELDS = frozenset({
    # langgraph-api 0.16.7's openapi.json: RunCreateStateful, RunCreateStateless and
    # their streaming forms (on_disconnect)
    "after_seconds", "assistant_id", "checkpoint", "checkpoint_during", "command", "config",
    "context", "durability", "feedback_keys", "if_not_exists", "input", "interrupt_after",
    "interrupt_before", "metadata", "multitask_strategy", "on_completion", "on_disconnect",
    "stream_mode", "stream_resumable", "stream_subgraphs", "webhook",
    # and what its models/run.py create_valid_run reads beside them
    "checkpoint_id", "langsmith_tracer",
})
READ_BESIDE_THE_SHAPE = frozenset({"on_disconnect"})  # views._on_disconnect reads it


def table_rows() -> list[dict[str, Any]]:
    """The README table's rows: the fields each names, the body it is sent as, and
    whether Planwatch refuses it."""
    lines = README.read_text().splitlines()
    start = lines.index(HEADER) + 2  # past the header and its rule
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        field, sent, _, planwatch = (cell.strip() for cell in line.strip("|").split(" | "))
        rows.append({"fields": re.findall(r"`([^`]+)`", field),
                     "sent": json.loads(sent.strip("`")),
                     "refused": planwatch.startswith("refused"),
                     "ignored": planwatch.startswith("accepted and ignored")})
    return rows


ROWS = table_rows()

DOORS = ["/threads/{tid}/runs", "/threads/{tid}/runs/stream", "/threads/{tid}/runs/wait",
         "/runs", "/runs/stream", "/runs/wait"]
"""Where a run request comes in (``POST /runs/batch`` is not served)."""


def test_the_table_says_refused_or_ignored_for_every_row():
    assert ROWS and all(row["refused"] != row["ignored"] for row in ROWS), ROWS
    for row in ROWS:  # the body sent sets the field the row names
        top = row["fields"][0].split(".")[0]
        assert top in row["sent"], row


def test_every_field_of_langgraphs_run_request_is_declared_or_in_the_table():
    tabled = {f.split(".")[0] for row in ROWS for f in row["fields"]}
    declared = set(bodies.RunBody._declared_fields) | READ_BESIDE_THE_SHAPE
    assert LANGGRAPH_FIELDS - declared - tabled == set()


@pytest.mark.django_db(transaction=True)
@pytest.mark.server
@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("row", ROWS, ids=[r["fields"][0] for r in ROWS])
def test_each_row_is_what_each_door_does(row, door, lg_url, sdk_user):
    headers = {"x-api-key": api_token(sdk_user)}
    tid = httpx.post(f"{lg_url}/threads", json={}, headers=headers).json()["thread_id"]
    payload = {"assistant_id": "orders", "input": {"item": "lamp"}, **row["sent"]}
    if not door.startswith("/threads"):
        payload.setdefault("on_completion", "keep")  # its thread kept, to be read
    answer = httpx.post(f"{lg_url}{door.format(tid=tid)}", json=payload, headers=headers,
                        timeout=60)
    if row["refused"]:
        assert answer.status_code == 422, answer.text
        assert row["fields"][0] in answer.json()["errors"], answer.text
        assert not Run.objects.filter(conversation_id=tid).exists()
        return
    # accepted and ignored: the run starts at once, and reaches its question as it would
    assert answer.status_code == 200, answer.text
    run_id = answer.headers["Content-Location"].rsplit("/", 1)[1]
    run = LangGraphRun.objects.get(id=run_id).run
    wait_run(run.id, statuses=("interrupted",))
    assert run.interrupts.get().status == Interrupt.Status.PENDING


@pytest.mark.django_db(transaction=True)
@pytest.mark.server
def test_runs_batch_is_not_served(lg_url, sdk_user):
    answer = httpx.post(f"{lg_url}/runs/batch", headers={"x-api-key": api_token(sdk_user)},
                        json=[{"assistant_id": "orders", "input": {"item": "lamp"}}])
    assert answer.status_code == 404, answer.text
    assert "is not served by Planwatch" in answer.json()["detail"]
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.server
@pytest.mark.parametrize("after", [0, None])
def test_after_seconds_zero_or_null_starts_the_run_now_as_asked(after, lg_url, sdk_user):
    headers = {"x-api-key": api_token(sdk_user)}
    answer = httpx.post(f"{lg_url}/runs/wait", headers=headers, timeout=60, json={
        "assistant_id": "orders", "input": {"item": "lamp"}, "after_seconds": after,
        "on_completion": "keep"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["item"] == "lamp"
