"""The runs API: start (checked by the registry), list with filters and cursors, cancel."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from django.test import Client

from dashboard.models import Interrupt, Run, RunEvent
from dashboard.runs.record import event_dict
from tests.conftest import api_token

pytestmark = [pytest.mark.pg, pytest.mark.django_db]



@pytest.fixture
def api(operator) -> Client:
    """The operator's token client."""
    return Client(headers={"Authorization": f"Token {api_token(operator)}"})


def post(client: Client, path: str, data) -> object:
    return client.post(path, json.dumps(data), content_type="application/json")


def make_run(user=None, graph="acquisition", state=Run.State.SUCCEEDED) -> Run:
    return Run.objects.create(graph=graph, thread_id=f"{uuid.uuid4()}:planner", state=state,
                              created_by=user)


def test_start_a_run_with_input_checked_by_the_graph(api):
    response = post(api, "/api/runs/", {"graph": "acquisition",
                                        "input": {"region": "France", "max_iters": "12"}})
    assert response.status_code == 201
    body = response.json()
    assert body["graph"] == "acquisition" and body["status"] == "queued"
    # its checkpoint thread is its thread's, which has the run's id (a run of the pages)
    assert body["created_by"] == "olga" and body["thread_id"] == body["id"]
    run = Run.objects.get(id=body["id"])
    assert run.input["max_iters"] == 12  # the graph's make_input cleaned it
    assert run.input == body["input"]


def test_a_run_starts_with_djangos_debug_on(api, settings):
    # DEBUG's cursor formats each statement with % to log it: a ? statement with
    # parameters was a TypeError, and every run start a 500
    settings.DEBUG = True
    response = post(api, "/api/runs/", {"graph": "acquisition", "input": {"region": "France"}})
    assert response.status_code == 201, response.content[:500]
    run = Run.objects.select_related("conversation").get(id=response.json()["id"])
    assert run.status == "queued" and run.conversation.status == "busy"


def test_a_run_executes_to_its_question_and_on_with_djangos_debug_on(api, executor, settings):
    from tests.conftest import wait_run

    settings.DEBUG = True
    started = post(api, "/api/runs/", {"graph": "acquisition", "input": {"region": "France"}})
    run = wait_run(started.json()["id"])
    assert run.status == "interrupted", run.error_message
    pending = Interrupt.objects.get(run=run, status="pending")
    answered = post(api, f"/api/interrupts/{pending.pk}/answer/", {"answer": "France"})
    assert answered.status_code == 200, answered.content[:500]
    deadline = time.monotonic() + 60  # the answer taken up: the next question, or the end
    while Run.objects.get(id=run.id).status not in ("succeeded", "failed") and \
            Interrupt.objects.filter(run=run).count() < 2:
        assert time.monotonic() < deadline, "the answered run did not go on"
        time.sleep(0.05)
    run = Run.objects.get(id=run.id)
    assert run.status != "failed", run.error_message


@pytest.mark.parametrize(("data", "field", "words"), [
    ({}, "graph", "This field is required"),
    ({"graph": "nope"}, "graph", "unknown graph 'nope'; registered graphs: acquisition"),
    ({"graph": "acquisition", "input": [1]}, "input", 'Expected a dictionary of items'),
    ({"graph": "acquisition", "input": {"max_iters": 500}}, "max_iters", "out of range"),
    ({"graph": "acquisition", "input": {"colour": "red"}}, "__all__", "unknown input field"),
    ([1, 2], "", "Invalid data. Expected a dictionary"),
])
def test_bad_start_input_is_a_400_naming_the_field(api, data, field, words):
    response = post(api, "/api/runs/", data)
    assert response.status_code == 400
    body = response.json()
    assert words in body["detail"]
    if field:
        assert field in body["errors"] and field in body["detail"]
    assert Run.objects.count() == 0


def test_malformed_json_is_a_400(api):
    response = api.post("/api/runs/", '{"graph": ', content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"].startswith("JSON parse error")


def test_a_form_encoded_body_is_a_415(api):
    response = api.post("/api/runs/", {"graph": "acquisition"})
    assert response.status_code == 415
    assert "multipart/form-data" in response.json()["detail"]


def test_a_two_megabyte_body_is_refused_with_a_413(api):
    body = json.dumps({"graph": "acquisition", "input": {"goal": "x" * (2 * 1024 * 1024)}})
    response = api.post("/api/runs/", body, content_type="application/json")
    assert response.status_code == 413
    detail = response.json()["detail"]
    assert detail == (f"request body is {len(body)} bytes; the limit is 262144 "
                      "(DATA_UPLOAD_MAX_MEMORY_SIZE). Send less data.")
    assert Run.objects.count() == 0


def test_list_is_newest_first_and_filters_by_graph_status_and_creator(api, operator, viewer):
    a = make_run(operator, "acquisition", Run.Status.SUCCEEDED)
    b = make_run(viewer, "decomposition", Run.Status.FAILED)
    c = make_run(operator, "decomposition", Run.Status.FAILED)

    def ids(**params):
        response = api.get("/api/runs/", params)
        assert response.status_code == 200
        return [r["id"] for r in response.json()["results"]]

    assert ids() == [str(c.id), str(b.id), str(a.id)]
    assert ids(graph="decomposition") == [str(c.id), str(b.id)]
    assert ids(status="failed", creator="olga") == [str(c.id)]
    assert ids(creator="vic") == [str(b.id)]
    assert ids(graph="acquisition", status="failed") == []


def test_an_unknown_status_filter_is_a_400_listing_the_choices(api):
    response = api.get("/api/runs/", {"status": "done"})
    assert response.status_code == 400
    assert response.json()["detail"] == 'status: "done" is not a valid choice.'


def test_a_blank_status_filter_is_a_400_saying_to_leave_it_out(api):
    response = api.get("/api/runs/?status=")
    assert response.status_code == 400
    assert "leave status out" in response.json()["detail"]


def test_cursor_pages_walk_every_run_once_newest_first(api):
    made = [make_run() for _ in range(5)]
    seen, url, pages = [], "/api/runs/?page_size=2", 0
    while url:
        body = api.get(url).json()
        seen += [r["id"] for r in body["results"]]
        url, pages = body["next"], pages + 1
    assert pages == 3
    assert seen == [str(r.id) for r in reversed(made)]


def test_a_bad_cursor_is_a_404_json(api):
    response = api.get("/api/runs/", {"cursor": "garbage"})
    assert response.status_code == 404
    assert response.json()["detail"] == "Invalid cursor"


def test_retrieve_a_run_and_404_for_unknown_or_malformed_ids(api, operator):
    run = make_run(operator)
    assert api.get(f"/api/runs/{run.id}/").json()["id"] == str(run.id)
    missing = uuid.uuid4()
    response = api.get(f"/api/runs/{missing}/")
    assert response.status_code == 404
    assert response.json()["detail"] == f"no run '{missing}'; list runs at /api/runs/"
    assert api.get("/api/runs/not-a-uuid/").status_code == 404


def test_cancel_a_queued_run_then_a_second_cancel_is_a_409(api, operator):
    run = make_run(operator, state=Run.State.QUEUED)
    response = api.post(f"/api/runs/{run.id}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert run.events.get().kind == RunEvent.Kind.RUN_CANCELLED
    again = api.post(f"/api/runs/{run.id}/cancel/")
    assert again.status_code == 409
    assert again.json() == {
        "detail": f"run {run.id} already cancelled; only queued, running or interrupted runs "
                  "can be cancelled",
        "code": "run_state", "errors": {},
    }


def test_events_after_a_seq_in_seq_order_like_the_websocket(api, operator):
    run = make_run(operator)
    for seq in range(1, 8):
        RunEvent.objects.create(run=run, seq=seq, kind=RunEvent.Kind.NODE_FINISHED,
                                node=f"n{seq}", payload={"update": {"n": seq}})
    response = api.get(f"/api/runs/{run.id}/events/", {"after": 3})
    assert response.status_code == 200
    results = response.json()["results"]
    assert [e["seq"] for e in results] == [4, 5, 6, 7]
    assert results == [event_dict(e) for e in run.events.filter(seq__gt=3).order_by("seq")]


def test_event_cursor_pages_are_gapless(api, operator):
    run = make_run(operator)
    RunEvent.objects.bulk_create(RunEvent(run=run, seq=seq, kind=RunEvent.Kind.CUSTOM)
                                 for seq in range(1, 11))
    seqs, url = [], f"/api/runs/{run.id}/events/?after=1&page_size=4"
    while url:
        body = api.get(url).json()
        seqs += [e["seq"] for e in body["results"]]
        url = body["next"]
    assert seqs == list(range(2, 11))


@pytest.mark.parametrize("after", ["-1", "x", "1.5"])
def test_a_bad_after_is_a_400_naming_it(api, operator, after):
    run = make_run(operator)
    response = api.get(f"/api/runs/{run.id}/events/", {"after": after})
    assert response.status_code == 400
    assert response.json()["detail"].startswith("after: ")


def test_unknown_api_paths_are_json_404s(api):
    response = api.get("/api/nothing/here/")
    assert response.status_code == 404
    assert response.json()["detail"] == "no API resource at '/api/nothing/here/'; see /api/docs/"


@pytest.mark.parametrize(("size", "words"), [("0", "0 is out of range"),
                                             ("201", "201 is out of range"),
                                             ("many", "'many' is not a whole number")])
def test_a_bad_page_size_is_a_400_naming_it(api, size, words):
    response = api.get("/api/runs/", {"page_size": size})
    assert response.status_code == 400
    assert response.json()["detail"] == f"page_size: {words}; give a whole number from 1 to 200"


def test_a_djangos_404_inside_the_api_is_json_too(api):
    # once "-0" with the unknown format suffix "5"; format suffixes are not served (every
    # door has an owner: tests/security/test_every_door.py), so no route: the API's 404
    response = api.get("/api/interrupts/-0.5/")
    assert response.status_code == 404
    assert response.json() == {"detail": "no API resource at '/api/interrupts/-0.5/'; see "
                                         "/api/docs/", "code": "not_found", "errors": {}}


def test_a_new_run_is_announced_as_queued_before_it_is_dispatched(
        api, monkeypatch, django_capture_on_commit_callbacks):
    # Told after the dispatch, "queued" could reach the runs list after the executor's
    # "running" (or "succeeded") and stay there; the announcement needs no read of the run.
    from dashboard.runs import dispatch, doorbells

    told: list[tuple[str, object]] = []

    async def record(group: str, message: dict) -> None:
        told.append((group, message))

    monkeypatch.setattr(doorbells, "asend", record)
    monkeypatch.setattr(dispatch, "dispatch", lambda run_id, mode: told.append(
        ("dispatched", (run_id, mode, list(Run.objects.values_list("status", flat=True))))))
    with django_capture_on_commit_callbacks(execute=True):
        response = post(api, "/api/runs/", {"graph": "acquisition",
                                            "input": {"region": "France"}})
    assert response.status_code == 201
    run_id = uuid.UUID(response.json()["id"])
    # the runs list only: nobody can watch a run not yet answered for (its page and
    # streams read the log when they open); no inbox message: no question
    assert [group for group, _ in told] == [doorbells.RUNS_GROUP, "dispatched"]
    summary = told[0][1]["run"]
    assert summary["id"] == str(run_id) and summary["status"] == "queued"
    assert summary["current_node"] == "" and summary["started_at"] is None
    assert told[1][1] == (run_id, "start", ["queued"])
