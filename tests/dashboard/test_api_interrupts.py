"""The interrupts, checkpoints and graphs APIs, and one run driven end to end through them."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from dashboard.models import Interrupt, Run
from tests.conftest import api_token, wait_run

pytestmark = pytest.mark.pg


def token_client(user) -> Client:
    """``user``'s token client."""
    return Client(headers={"Authorization": f"Token {api_token(user)}"})


def post(client: Client, path: str, data) -> object:
    return client.post(path, json.dumps(data), content_type="application/json")


def asked(run: Run, interrupt_id: str = "i-1", status=Interrupt.Status.PENDING) -> Interrupt:
    return Interrupt.objects.create(run=run, interrupt_id=interrupt_id, node="ask_user",
                                    payload={"field": "core.region"}, status=status)


def make_run(graph: str = "acquisition", state=Run.State.INTERRUPTED) -> Run:
    return Run.objects.create(graph=graph, thread_id=f"{uuid.uuid4()}:planner", state=state)


@pytest.mark.django_db
def test_pending_list_filters_by_run_and_graph_and_hides_answered(operator):
    api = token_client(operator)
    a, b = make_run("acquisition"), make_run("decomposition")
    first, second = asked(a, "i-1"), asked(b, "i-2")
    asked(a, "i-3", status=Interrupt.Status.CANCELLED)

    def ids(**params):
        response = api.get("/api/interrupts/", params)
        assert response.status_code == 200
        return [i["id"] for i in response.json()["results"]]

    assert ids() == [first.pk, second.pk]
    assert ids(run=str(a.id)) == [first.pk]
    assert ids(graph="decomposition") == [second.pk]
    bad = api.get("/api/interrupts/", {"run": "nope"})
    assert bad.status_code == 400 and bad.json()["detail"] == "run: Must be a valid UUID."
    # an empty run is not "every run" (DRF's reading of an empty form field): it is named
    empty = api.get("/api/interrupts/?run=")
    assert empty.status_code == 400
    assert empty.json()["detail"] == "run: is empty: give a value, or leave run out"


@pytest.mark.django_db
def test_answer_bad_answers_are_400s_naming_answer(operator):
    api = token_client(operator)
    pending = asked(make_run())
    for data, words in [({}, "answer: This field is required."),
                        ({"answer": None}, "answer: This field may not be null."),
                        ({"answer": "x" * 70_000}, "limit is 65,536")]:
        response = post(api, f"/api/interrupts/{pending.pk}/answer/", data)
        assert response.status_code == 400, data
        assert words in response.json()["detail"]
        assert "answer" in response.json()["errors"]
    pending.refresh_from_db()
    assert pending.status == Interrupt.Status.PENDING


@pytest.mark.django_db
def test_a_second_answer_is_a_409_saying_who_answered(operator):
    api = token_client(operator)
    pending = asked(make_run())
    first = post(api, f"/api/interrupts/{pending.pk}/answer/", {"answer": "Germany"})
    assert first.status_code == 200
    assert first.json()["status"] == "answered" and first.json()["answered_by"] == "olga"
    second = post(api, f"/api/interrupts/{pending.pk}/answer/", {"answer": "France"})
    assert second.status_code == 409
    assert second.json()["code"] == "interrupt_closed"
    assert second.json()["detail"].startswith("already answered by olga at ")
    assert api.get(f"/api/interrupts/{pending.pk}/").json()["answer"] == "Germany"


@pytest.mark.django_db
@pytest.mark.parametrize("pk", ["999999", "abc", "99999999999999999999", "²", "\u0661"])
def test_unknown_interrupts_are_404s(operator, pk):
    response = token_client(operator).get(f"/api/interrupts/{pk}/")
    assert response.status_code == 404
    detail = response.json()["detail"]
    assert detail == f"no interrupt '{pk}'; list pending ones at /api/interrupts/"


@pytest.mark.django_db
def test_graphs_list_their_input_and_detail_their_topology(operator):
    import tests.graphs  # noqa: F401  (registers test.echo, a name with a dot)

    api = token_client(operator)
    graphs = {g["name"]: g for g in api.get("/api/graphs/").json()}
    assert {"acquisition", "decomposition", "test.echo"} <= set(graphs)
    fields = {f["name"]: f for f in graphs["acquisition"]["input_fields"]}
    assert fields["max_iters"] == {
        "name": "max_iters", "label": "Max iterations", "kind": "integer", "required": True,
        "default": 20, "help": "Loop iterations before the planner stops and reports what it has.",
        "choices": [], "min_value": 1.0, "max_value": 100.0,
    }
    assert "Germany" in fields["region"]["choices"]

    detail = api.get("/api/graphs/acquisition/").json()
    assert detail["version"] == graphs["acquisition"]["version"]
    assert {"tick", "decide", "ask_user", "finish", "__start__", "__end__"} <= set(detail["nodes"])
    assert {"source": "ask_user", "target": "observe_user", "conditional": False} in detail["edges"]
    assert {"source": "decision_policy", "target": "ask_user", "conditional": True} \
        in detail["edges"]
    echo = api.get("/api/graphs/test.echo/").json()
    assert echo["nodes"] == ["__start__", "step", "ask", "done", "__end__"]

    missing = api.get("/api/graphs/nope/")
    assert missing.status_code == 404
    assert missing.json()["detail"].startswith("unknown graph 'nope'; registered graphs: ")


def test_a_run_driven_through_the_api_with_its_events_and_checkpoints(executor, operator):
    api = token_client(operator)
    created = post(api, "/api/runs/", {"graph": "test.echo", "input": {"steps": 4, "ask": True}})
    assert created.status_code == 201
    run_id = created.json()["id"]
    assert wait_run(run_id).status == Run.Status.INTERRUPTED

    pending = api.get("/api/interrupts/", {"run": run_id}).json()["results"]
    assert [i["payload"]["prompt"] for i in pending] == ["Say something"]
    answered = post(api, f"/api/interrupts/{pending[0]['id']}/answer/", {"answer": "hi"})
    assert answered.status_code == 200
    run = wait_run(run_id, statuses=("succeeded", "failed", "cancelled"))
    body = api.get(f"/api/runs/{run_id}/").json()
    assert body["status"] == "succeeded" and body["output"] == {"n": 4, "answer": "hi"}

    events = api.get(f"/api/runs/{run_id}/events/", {"page_size": 1000}).json()["results"]
    assert [e["seq"] for e in events] == list(range(1, run.last_seq + 1))
    assert events[-1]["kind"] == "run_succeeded"

    checkpoints = api.get(f"/api/runs/{run_id}/checkpoints/").json()
    assert checkpoints and all(c["thread_id"] == run.thread_id for c in checkpoints)
    assert "values" not in checkpoints[0]
    latest = api.get(f"/api/runs/{run_id}/checkpoints/{checkpoints[0]['checkpoint_id']}/")
    assert latest.status_code == 200
    values = latest.json()["values"]
    assert values["n"] == 4 and values["answer"] == "hi"
    assert values["result"] == {"n": 4, "answer": "hi"}
    assert latest.json()["parent_id"] == checkpoints[1]["checkpoint_id"]
    limited = api.get(f"/api/runs/{run_id}/checkpoints/", {"limit": 2}).json()
    assert [c["checkpoint_id"] for c in limited] == [c["checkpoint_id"] for c in checkpoints[:2]]

    missing = api.get(f"/api/runs/{run_id}/checkpoints/no-such-checkpoint/")
    assert missing.status_code == 404
    assert "has no checkpoint 'no-such-checkpoint'" in missing.json()["detail"]
    bad = api.get(f"/api/runs/{run_id}/checkpoints/", {"limit": 0})
    assert bad.status_code == 400 and bad.json()["detail"].startswith("limit: ")
