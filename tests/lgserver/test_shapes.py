"""The shapes /langgraph/ returns, checked against the Agent Protocol's OpenAPI schemas
(vendored under docs/vendor/agent-protocol/) and langgraph-sdk's own types."""

from __future__ import annotations

import json
import typing
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from langgraph_sdk import schema as sdk_schema

from dashboard import services
from dashboard.lgserver import shapes
from dashboard.models import Run
from dashboard.runs import states
from tests.conftest import api_token, wait_run

pytestmark = pytest.mark.django_db(transaction=True)

JSON = "application/json"
SPEC = json.loads((Path(__file__).resolve().parents[2] / "docs" / "vendor" / "agent-protocol"
                   / "openapi.json").read_text())


def protocol(name: str, value: Any) -> None:
    """``value`` is valid for the protocol's component schema ``name`` (refs resolved)."""
    schema = {**SPEC["components"]["schemas"][name], "components": SPEC["components"]}
    errors = sorted(Draft202012Validator(schema).iter_errors(value), key=str)
    assert not errors, [e.message for e in errors]


def sdk_type(kind: Any, value: Any) -> None:
    """``value`` has every key langgraph-sdk's TypedDict ``kind`` requires, and each of its
    ``Literal`` fields (statuses, strategies) holds one of the SDK's values."""
    assert isinstance(value, dict)
    hints = typing.get_type_hints(kind, include_extras=True)
    required = {k for k, h in hints.items() if typing.get_origin(h) is not typing.NotRequired}
    assert not required - set(value), required - set(value)
    for key, hint in hints.items():
        if typing.get_origin(hint) is typing.Literal and key in value:
            assert value[key] in typing.get_args(hint), (key, value[key])


@pytest.fixture
def api(operator, executor):
    return Client(headers={"x-api-key": api_token(operator)})


def test_threads_states_runs_and_assistants_have_the_shapes_clients_expect(api, operator):
    run = services.run_create(graph="acquisition", input={"goal": "size it"}, user=operator)
    wait_run(run.id)
    thread = api.get(f"/langgraph/threads/{run.id}").json()
    protocol("Thread", thread)
    sdk_type(sdk_schema.Thread, thread)
    state = api.get(f"/langgraph/threads/{run.id}/state").json()
    protocol("ThreadState", state)
    sdk_type(sdk_schema.ThreadState, state)
    history = api.post(f"/langgraph/threads/{run.id}/history", {"limit": 5},
                       content_type="application/json").json()
    assert 3 <= len(history) <= 5
    for past in history:
        protocol("ThreadState", past)
        protocol("ThreadCheckpoint", past["checkpoint"])
    runs = api.get(f"/langgraph/threads/{run.id}/runs").json()
    assert [r["run_id"] for r in runs] == [str(run.id)]
    sdk_type(sdk_schema.Run, runs[0])
    assistants = api.post("/langgraph/assistants/search", {},
                          content_type="application/json").json()
    for assistant in assistants:
        sdk_type(sdk_schema.Assistant, assistant)
    schemas = api.get("/langgraph/assistants/acquisition/schemas").json()
    sdk_type(sdk_schema.GraphSchema, schemas)
    protocol("AgentSchema", {"agent_id": schemas["graph_id"], **schemas})
    created = api.post("/langgraph/threads", {"metadata": {"k": 1}},
                       content_type="application/json").json()
    protocol("Thread", created)
    assert created["status"] == "idle" and created["metadata"] == {"k": 1}


def test_bad_requests_are_422s_naming_the_field_never_500s(api, operator):
    operator.user_permissions.add(Permission.objects.get(codename="debug_run"))
    thread = api.post("/langgraph/threads", {}, content_type="application/json").json()
    runs = f"/langgraph/threads/{thread['thread_id']}/runs"
    cases = [
        ({}, "assistant_id"),
        ({"assistant_id": "acquisition", "input": [1]}, "input"),
        ({"assistant_id": "acquisition", "command": ["resume"]}, "command"),
        ({"assistant_id": "acquisition", "interrupt_before": "decide"}, "interrupt_before"),
        ({"assistant_id": "acquisition", "interrupt_before": ["nope"]}, "nope"),
        ({"assistant_id": "acquisition", "multitask_strategy": "sometimes"},
         "multitask_strategy"),
        ({"assistant_id": "acquisition", "metadata": [1]}, "metadata"),
        ({"assistant_id": "acquisition", "input": {"max_iters": 500}}, "max_iters"),
    ]
    for data, field in cases:
        response = api.post(runs, data, content_type="application/json")
        assert response.status_code == 422, (data, response.content)
        assert field in response.json()["detail"], (data, response.json())
    assert api.post(runs, "[1]", content_type="application/json").status_code == 422
    assert api.post(f"{runs}/stream", {"assistant_id": "acquisition", "stream_mode": "x"},
                    content_type="application/json").status_code == 422
    assert api.get("/langgraph/threads/search").status_code == 405
    assert api.post("/langgraph/threads/search", {"limit": "many"},
                    content_type="application/json").status_code == 422


def test_a_thread_created_on_demand_needs_a_uuid_for_its_id(api):
    response = api.post("/langgraph/threads/not-a-uuid/runs",
                        {"assistant_id": "acquisition", "if_not_exists": "create"},
                        content_type="application/json")
    assert response.status_code == 422  # it was a 500
    assert "not a UUID" in response.json()["detail"]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                max_size=4),
    max_leaves=10)
IDS = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="/?#%"), min_size=1,
              max_size=20)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(body=st.dictionaries(st.sampled_from([
    "assistant_id", "input", "command", "config", "context", "checkpoint_id", "metadata",
    "stream_mode", "interrupt_before", "multitask_strategy", "if_not_exists", "limit",
    "values", "as_node", "before", "status"]), JSON_VALUES, max_size=6), some_id=IDS)
def _fuzz(api, thread_id, body, some_id):
    quoted = quote(some_id, safe="")
    calls = [
        api.post(f"/langgraph/threads/{thread_id}/runs", body, content_type=JSON),
        api.post(f"/langgraph/threads/{quoted}/runs/wait", body, content_type=JSON),
        api.post("/langgraph/threads/search", body, content_type=JSON),
        api.post(f"/langgraph/threads/{thread_id}/state", body, content_type=JSON),
        api.post(f"/langgraph/threads/{thread_id}/history", body, content_type=JSON),
        api.get(f"/langgraph/threads/{thread_id}/state/{quoted}"),
        api.get(f"/langgraph/assistants/{quoted}/schemas"),
        api.get(f"/langgraph/threads/{thread_id}/runs/{quoted}"),
    ]
    assert all(c.status_code < 500 for c in calls), [(c.status_code, c.content[:300])
                                                      for c in calls]


def test_random_requests_never_give_a_server_error(api, operator):
    operator.user_permissions.add(*Permission.objects.filter(codename__in=[
        "debug_run", "fork_run"]))
    thread = api.post("/langgraph/threads", {}, content_type=JSON).json()
    _fuzz(api, thread["thread_id"])


def test_a_run_about_to_resume_or_go_on_is_busy_and_pending(operator):
    """An answer or a continue waiting for an executor is a state of the run, read with
    it in one column: such a run is busy, and pending to LangGraph's clients, until an
    executor takes it up."""
    run = Run.objects.create(graph="acquisition", thread_id=f"{uuid.uuid4()}:planner",
                             state=Run.State.RESUMING, created_by=operator, last_seq=1)
    seen = {}
    for state in (Run.State.RESUMING, Run.State.RUNNING, Run.State.INTERRUPTED,
                  Run.State.CONTINUING, Run.State.PAUSED):
        Run.objects.filter(id=run.id).update(state=state)
        read = Run.objects.get(id=run.id)
        seen[str(state)] = (shapes.busy(read), states.langgraph_status(read.state,
                                                                       superseded=False),
                            read.status)
    assert seen == {"resuming": (True, "pending", "interrupted"),
                    "running": (True, "running", "running"),
                    "interrupted": (False, "interrupted", "interrupted"),
                    "continuing": (True, "pending", "paused"),
                    "paused": (False, "interrupted", "paused")}
