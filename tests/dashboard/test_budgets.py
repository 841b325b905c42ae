"""Budgets: each kind trips (pause and stop), a paused run extended goes on and finishes,
layers resolve field by field, warnings come once, bad budgets are a 422."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from dashboard import services
from dashboard.models import Run, RunEvent
from dashboard.runs import budgets
from tests.conftest import api_token, assert_gapless, wait_run
from tests.dashboard import budget_graph
from tests.support.models import CALL_COST

Kind = RunEvent.Kind
PAUSED_OR_DONE = ("succeeded", "failed", "cancelled", "interrupted", "paused")


def _start(operator, budget, **input):
    run = services.run_create(graph=budget_graph.NAME, input=input, user=operator,
                              options=services.RunOptions(budget=budget))
    return wait_run(run.id, PAUSED_OR_DONE)


def _last(run: Run) -> RunEvent:
    return assert_gapless(run)[-1]


# -- one parser ----------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "field", "words"), [
    ({"max_tokens": -1}, "budget.max_tokens", "negative"),
    ({"max_cost_usd": "lots"}, "budget.max_cost_usd", "not a number"),
    ({"max_model_calls": True}, "budget.max_model_calls", "not a number"),
    ({"max_model_calls": 2.5}, "budget.max_model_calls", "whole number"),
    ({"max_wall_minutes": 1e12}, "budget.max_wall_minutes", "largest accepted"),
    ({"max_cost_usd": float("nan")}, "budget.max_cost_usd", "not a number"),
    ({"max_cost_usd": float("inf")}, "budget.max_cost_usd", "largest accepted"),
    ({"max_tokens": 10**400}, "budget.max_tokens", "largest accepted"),
    ({"max_tokens": "1e999"}, "budget.max_tokens", "largest accepted"),
    ({"max_tokens": [1]}, "budget.max_tokens", "not a number"),
    ({"max_dollars": 1}, "budget.max_dollars", "unknown budget"),
    ({"on_limit": "explode"}, "budget.on_limit", "not one of: pause, stop"),
    ({"on_limit": {"max_tokens": "wait"}}, "budget.on_limit.max_tokens", "not one of"),
    ({"warn_at": 1.5}, "budget.warn_at", "between 0 and 1"),
    ([1, 2], "budget", "must be an object"),
])
def test_a_bad_budget_names_its_field(raw, field, words):
    with pytest.raises(budgets.BudgetInvalid) as caught:
        budgets.budget_parse(raw)
    assert caught.value.field == field and words in caught.value.message


def test_layers_resolve_field_by_field(settings):
    settings.PLANWATCH = {**settings.PLANWATCH, "BUDGET": {
        "max_tokens": 1000, "max_cost_usd": 1.0, "max_wall_minutes": 60, "on_limit": "stop"}}
    spec = dataclasses.replace(budget_graph.SPEC, budget={
        "max_cost_usd": 0.5, "max_model_calls": 20, "on_limit": {"max_cost_usd": "pause"}})
    assistant = SimpleNamespace(config={"configurable": {"budget": {
        "max_model_calls": 10, "max_wall_minutes": None, "warn_at": 0.5}}})
    options = services.RunOptions(assistant=assistant, configurable={"budget": {
        "max_tokens": 5000, "max_working_minutes": 3}})
    resolved = services.budget_of(spec, options)
    assert resolved.active() == {
        "max_tokens": 5000,  # the request widened the server's
        "max_cost_usd": 0.5,  # the graph narrowed the server's
        "max_model_calls": 10,  # the assistant narrowed the graph's
        "max_working_minutes": 3,  # the request's own
    }  # and the assistant lifted the server's wall limit
    assert resolved.action("max_cost_usd") == "pause" and resolved.action("max_tokens") == "stop"
    assert resolved.share() == 0.5
    # the request may name its budget in the LangGraph context instead
    by_context = services.budget_of(spec, services.RunOptions(context={"budget": {
        "max_model_calls": 3}}))
    assert by_context.limit("max_model_calls") == 3 and by_context.limit("max_tokens") == 1000


def test_a_bad_layer_is_a_budget_error_naming_the_field(settings):
    with pytest.raises(services.BudgetError) as caught:
        services.budget_of(budget_graph.SPEC, services.RunOptions(configurable={
            "budget": {"max_tokens": -5}}))
    assert caught.value.errors == {"budget.max_tokens": caught.value.errors[
        "budget.max_tokens"]} and "negative" in caught.value.message


# -- each kind trips, pause and stop ---------------------------------------------------------


@pytest.mark.parametrize("action", ["stop", "pause"])
def test_model_calls_budget_trips_on_the_scripted_model(executor, operator, action):
    run = _start(operator, {"max_model_calls": 2, "on_limit": action}, steps=5)
    assert run.model_calls == 2  # the third call was never sent
    reached = run.events.get(kind=Kind.BUDGET_REACHED).payload
    assert reached == {"budget": {"kind": "max_model_calls", "limit": 2, "used": 2},
                       "on_limit": action}
    last = _last(run)
    if action == "stop":
        assert run.status == Run.Status.CANCELLED
        assert last.kind == Kind.RUN_CANCELLED
        assert last.payload["budget"] == {"kind": "max_model_calls", "limit": 2, "used": 2}
    else:
        assert run.state == Run.State.PAUSED and last.kind == Kind.RUN_PAUSED
        assert last.payload["budget"]["kind"] == "max_model_calls"
        assert last.payload["before"] == ["call"]


@pytest.mark.parametrize(("budget", "kind", "limit"), [
    ({"max_tokens": 400, "on_limit": "stop"}, "max_tokens", 400),
    ({"max_cost_usd": CALL_COST * 2.5, "on_limit": "stop"}, "max_cost_usd", CALL_COST * 2.5),
    ({"max_tokens": 400, "on_limit": "pause"}, "max_tokens", 400),
    ({"max_cost_usd": CALL_COST * 2.5, "on_limit": "pause"}, "max_cost_usd",
     CALL_COST * 2.5),
])
def test_tokens_and_cost_trip_at_the_node_after_the_call_that_crossed(
        on_test_model, operator, openai_server, budget, kind, limit):
    run = _start(operator, budget, steps=6)
    assert len(openai_server.requests) == run.model_calls == 3  # 150 tokens each
    payload = run.events.get(kind=Kind.BUDGET_REACHED).payload["budget"]
    assert payload["kind"] == kind and payload["limit"] == limit
    assert payload["used"] == pytest.approx(450 if kind == "max_tokens" else CALL_COST * 3)
    expected = Run.State.CANCELLED if budget["on_limit"] == "stop" else Run.State.PAUSED
    assert run.state == expected
    assert _last(run).payload["budget"]["kind"] == kind


def test_a_call_that_would_cross_the_token_budget_is_never_sent(on_test_model, operator,
                                                              openai_server):
    # 150 spent after the first; the second may answer 100 more: 250 > 200, refused
    run = _start(operator, {"max_tokens": 200, "on_limit": "stop"}, steps=3, max_tokens=100)
    assert len(openai_server.requests) == 1
    assert run.status == Run.Status.CANCELLED
    assert _last(run).payload["budget"] == {"kind": "max_tokens", "limit": 200, "used": 150}
    assert not run.events.filter(kind=Kind.MODEL_STARTED, seq__gt=run.events.get(
        kind=Kind.MODEL_FINISHED).seq).exists()  # the refused call is not in the log


@pytest.mark.parametrize("action", ["stop", "pause"])
@pytest.mark.parametrize("kind", ["max_working_minutes", "max_wall_minutes"])
def test_time_budgets_trip_at_a_node_boundary(executor, operator, kind, action):
    # 0.004 minutes = 0.24 s; each node waits 0.1 s
    run = _start(operator, {kind: 0.004, "on_limit": action}, steps=50, delay=0.1)
    reached = run.events.get(kind=Kind.BUDGET_REACHED).payload["budget"]
    assert reached["kind"] == kind and reached["used"] >= 0.004
    assert run.model_calls < 50
    assert run.state == (Run.State.CANCELLED if action == "stop" else Run.State.PAUSED)


# -- a paused run extended goes on ---------------------------------------------------------


def test_a_run_paused_at_its_budget_extended_by_the_api_goes_on_and_finishes(
        executor, operator, client):
    run = _start(operator, {"max_model_calls": 2, "on_limit": "pause"}, steps=4)
    assert run.state == Run.State.PAUSED
    token = api_token(operator)
    answered = client.post(f"/api/runs/{run.id}/budget/", {"extend": {"max_model_calls": 2}},
                           content_type="application/json",
                           HTTP_AUTHORIZATION=f"Token {token}")
    assert answered.status_code == 200, answered.content
    run = wait_run(run.id)
    assert run.status == Run.Status.SUCCEEDED and run.model_calls == 4
    assert run.output == {"said": ["call 1", "call 2", "call 3", "call 4"]}
    assert run.budget["max_model_calls"] == 4
    extended = run.events.get(kind=Kind.BUDGET_EXTENDED).payload
    assert extended["extend"] == {"max_model_calls": 2} and extended["by"] == "olga"


def test_a_run_paused_at_its_budget_stopped_by_the_api_ends_cancelled_with_the_budget(
        executor, operator, client):
    run = _start(operator, {"max_model_calls": 1, "on_limit": "pause"}, steps=3)
    token = api_token(operator)
    stopped = client.post(f"/api/runs/{run.id}/budget/", {"stop": True},
                          content_type="application/json", HTTP_AUTHORIZATION=f"Token {token}")
    assert stopped.status_code == 200, stopped.content
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert _last(run).payload["budget"] == {"kind": "max_model_calls", "limit": 1, "used": 1}


def test_extending_a_run_not_paused_at_a_budget_is_a_conflict(executor, operator, client):
    run = wait_run(services.run_create(graph=budget_graph.NAME, input={"steps": 1},
                                       user=operator).id)
    token = api_token(operator)
    answered = client.post(f"/api/runs/{run.id}/budget/", {"extend": {"max_tokens": 10}},
                           content_type="application/json", HTTP_AUTHORIZATION=f"Token {token}")
    assert answered.status_code == 409 and "not paused at a budget" in answered.json()["detail"]


# -- warnings --------------------------------------------------------------------------------


def test_a_warning_is_recorded_once_per_budget(executor, operator):
    run = _start(operator, {"max_model_calls": 10, "warn_at": 0.2}, steps=6)
    assert run.status == Run.Status.SUCCEEDED
    warned = list(run.events.filter(kind=Kind.BUDGET_WARNING))
    assert [w.payload["budget"]["kind"] for w in warned] == ["max_model_calls"]
    assert warned[0].payload["budget"]["used"] == 2  # 20 % of 10


# -- at the doors ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_bad_budget_is_a_422_on_the_api(client, operator):
    token = api_token(operator)
    answered = client.post("/api/runs/", {"graph": budget_graph.NAME, "input": {},
                                          "budget": {"max_cost_usd": -1}},
                           content_type="application/json", HTTP_AUTHORIZATION=f"Token {token}")
    assert answered.status_code == 422
    body = answered.json()
    assert "budget.max_cost_usd" in body["errors"] and "negative" in body["detail"]
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_a_bad_budget_is_a_422_on_langgraph(client, operator):
    token = api_token(operator)
    answered = client.post("/langgraph/runs/wait", json.dumps({
        "assistant_id": budget_graph.NAME, "input": {"steps": 1},
        "config": {"configurable": {"budget": {"max_tokens": "many"}}}}),
        content_type="application/json", HTTP_AUTHORIZATION=f"Token {token}")
    assert answered.status_code == 422, answered.content
    assert "budget.max_tokens" in answered.content.decode()
    assert not Run.objects.exists()


# -- the page --------------------------------------------------------------------------------


def test_the_trace_header_shows_each_budget_and_a_paused_run_extended_from_it_finishes(
        executor, operator, client):
    run = _start(operator, {"max_model_calls": 2, "max_wall_minutes": 60,
                            "on_limit": "pause", "warn_at": 0.5}, steps=3)
    client.force_login(operator)
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert 'id="budget-paused"' in page
    assert "Model calls budget of 2 reached (2 used)" in page
    assert 'id="budget-max_model_calls"' in page and "2 of 2" in page
    assert 'class="budget-use is-reached" id="budget-max_model_calls"' in page
    assert 'id="budget-max_wall_minutes"' in page and "at the limit: pause" in page
    # the debug panel says why it is paused, and asks (reloaded as the status moves)
    assert "at its budget: model calls budget of 2 reached" in page
    # the questions panel says so too, and not that it waits at a breakpoint
    assert 'id="questions-paused-budget"' in page and "paused at a breakpoint" not in page
    assert "paused at its budget</strong>" in page
    assert page.count(f'id="budget-form-{run.id}"') == 1
    assert client.get(f"/runs/{run.id}/debug/").content.decode().count(
        f'id="budget-extend-{run.id}"') == 1
    answered = client.post(f"/runs/{run.id}/budget/", {"action": "extend",
                                                       "kind": "max_model_calls",
                                                       "extend": "1"})
    assert answered.status_code == 302
    run = wait_run(run.id)
    assert run.status == Run.Status.SUCCEEDED and run.model_calls == 3
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert 'id="budget-paused"' not in page and "3 of 3" in page
    # extended: no longer marked reached, and warned again at its new share (3 of 3)
    assert 'class="budget-use is-warned" id="budget-max_model_calls"' in page
    warned = run.events.filter(kind=Kind.BUDGET_WARNING).values_list("payload", flat=True)
    assert [w["budget"]["limit"] for w in warned
            if w["budget"]["kind"] == "max_model_calls"] == [2, 3]


def test_a_bad_extension_from_the_page_is_said_and_changes_nothing(executor, operator,
                                                                 client):
    run = _start(operator, {"max_model_calls": 1, "on_limit": "pause"}, steps=2)
    client.force_login(operator)
    answered = client.post(f"/runs/{run.id}/budget/", {"action": "extend",
                                                       "kind": "max_model_calls",
                                                       "extend": "-3"}, follow=True)
    assert "extend.max_model_calls" in answered.content.decode()
    run.refresh_from_db()
    assert run.state == Run.State.PAUSED and run.budget["max_model_calls"] == 1


def test_a_viewer_may_not_extend_a_budget(executor, operator, viewer, client):
    run = _start(operator, {"max_model_calls": 1, "on_limit": "pause"}, steps=2)
    client.force_login(viewer)
    assert "permission to extend or stop it" in client.get(f"/runs/{run.id}/").content.decode()
    refused = client.post(f"/runs/{run.id}/budget/", {"action": "stop"})
    assert refused.status_code == 403
    run.refresh_from_db()
    assert run.state == Run.State.PAUSED


# -- counted and found -----------------------------------------------------------------------


def _scrape(client) -> dict[tuple[str, tuple], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(client.get("/metrics").content.decode())
            for s in family.samples}


def test_trips_are_counted_on_metrics_and_found_by_the_runs_list(executor, operator, client):
    before = _scrape(client)
    tripped = _start(operator, {"max_model_calls": 1}, steps=2)
    within = _start(operator, {"max_model_calls": 5}, steps=2)
    assert (tripped.status, within.status) == (Run.Status.CANCELLED, Run.Status.SUCCEEDED)
    key = ("planwatch_budget_trips_total", (("action", "stop"), ("budget", "max_model_calls")))
    assert _scrape(client)[key] - before.get(key, 0.0) == 1
    assert list(Run.objects.budget_reached()) == [tripped]
    client.force_login(operator)
    listed = client.get("/?budget=reached").content.decode()
    assert str(tripped.id)[:8] in listed and str(within.id)[:8] not in listed
    token = api_token(operator)
    api = client.get("/api/runs/?budget=reached", HTTP_AUTHORIZATION=f"Token {token}").json()
    assert [r["id"] for r in api["results"]] == [str(tripped.id)]
    assert api["results"][0]["budget"] == {"max_model_calls": 1}
    detail = client.get(f"/api/runs/{tripped.id}/", HTTP_AUTHORIZATION=f"Token {token}").json()
    assert detail["budget_use"]["uses"] == [{
        "kind": "max_model_calls", "limit": 1, "used": 1, "on_limit": "stop",
        "warned": True, "reached": True}]
    assert client.get("/api/runs/?budget=sometimes",
                      HTTP_AUTHORIZATION=f"Token {token}").status_code == 400


# -- notices ---------------------------------------------------------------------------------


def test_a_warning_and_a_trip_are_each_told_once_by_email_and_webhook(
        executor, operator, smtp, receiver, settings):
    from dashboard import notices
    from dashboard.models import Notice

    settings.PLANWATCH = {**settings.PLANWATCH, "NOTIFY_EMAIL": True}
    receiver.fail = 0
    operator.email = "olga@example.test"
    operator.save()
    run = _start(operator, {"max_model_calls": 2, "on_limit": "pause"}, steps=3)
    assert notices.notices_queue_budgets() == 2  # the warning, the trip
    assert notices.notices_queue_budgets() == 0  # each once
    sent = notices.notices_send_due()
    assert sorted((n.kind, n.channel, n.status) for n in sent) == [
        ("budget_reached", "email", "sent"), ("budget_reached", "webhook", "sent"),
        ("budget_warning", "email", "sent"), ("budget_warning", "webhook", "sent")]
    subjects = sorted(m["Subject"] for m in smtp.messages)
    assert subjects == ["[Planwatch] A run nears its budget",
                        "[Planwatch] A run reached its budget"]
    reached = next(m for m in smtp.messages if "reached" in m["Subject"])
    body = reached.get_content()
    assert "model calls budget of 2 reached (2 used); it waits for you to extend it" in body
    assert f"http://planwatch.test/runs/{run.id}/" in body
    hooks = sorted(receiver.calls, key=lambda c: c["body"]["event"])
    assert [c["body"]["event"] for c in hooks] == ["run.budget_reached", "run.budget_warning"]
    assert all(c["valid"] for c in hooks)
    assert hooks[0]["body"]["run"]["budget"] == {"kind": "max_model_calls", "limit": 2,
                                                 "used": 2}
    assert Notice.objects.filter(run=run).count() == 4


# -- every layer at its door -----------------------------------------------------------------


def test_the_new_run_form_sets_a_budget_and_names_a_bad_one(executor, operator, client):
    client.force_login(operator)
    form = client.get(f"/runs/new/?graph={budget_graph.NAME}").content.decode()
    assert 'name="budget-max_cost_usd"' in form and 'name="budget-on_limit"' in form
    refused = client.post("/runs/new/", {"graph": budget_graph.NAME, "steps": "2",
                                         "budget-max_model_calls": "-2"})
    assert refused.status_code == 400
    page = refused.content.decode()
    assert 'id="error-budget-max_model_calls"' in page and "is negative" in page
    assert not Run.objects.exists()
    started = client.post("/runs/new/", {"graph": budget_graph.NAME, "steps": "3",
                                         "budget-max_model_calls": "1",
                                         "budget-on_limit": "pause"})
    assert started.status_code == 302
    run = wait_run(Run.objects.get().id, PAUSED_OR_DONE)
    assert run.budget == {"max_model_calls": 1, "on_limit": {"*": "pause"}}
    assert run.state == Run.State.PAUSED and run.model_calls == 1


def test_an_assistant_and_a_langgraph_request_are_laid_field_by_field(
        executor, operator, client, settings):
    settings.PLANWATCH = {**settings.PLANWATCH, "BUDGET": {"max_wall_minutes": 30}}
    client.force_login(operator)
    made = client.post("/langgraph/assistants", json.dumps({
        "graph_id": budget_graph.NAME, "config": {"configurable": {"budget": {
            "max_model_calls": 9, "max_tokens": 500}}}}), content_type="application/json")
    assert made.status_code == 200, made.content
    thread = client.post("/langgraph/threads", "{}", content_type="application/json").json()
    started = client.post(f"/langgraph/threads/{thread['thread_id']}/runs", json.dumps({
        "assistant_id": made.json()["assistant_id"], "input": {"steps": 1},
        "config": {"configurable": {"budget": {"max_tokens": 800, "on_limit": "pause"}}}}),
        content_type="application/json")
    assert started.status_code == 200, started.content
    run = wait_run(Run.objects.get().id)
    assert run.budget == {"max_tokens": 800, "max_model_calls": 9, "max_wall_minutes": 30,
                          "on_limit": {"*": "pause"}}


def test_a_langgraph_json_graph_declares_its_budget(tmp_path):
    from planner.langgraph_config import ConfigError, graph_spec

    (tmp_path / "spend.py").write_text(
        "from langgraph.graph import StateGraph\nfrom typing import TypedDict\n"
        "class S(TypedDict):\n    n: int\n"
        "graph = StateGraph(S)\ngraph.add_node('a', lambda s: s)\n"
        "graph.set_entry_point('a')\n")
    spec = graph_spec("spend", {"path": "./spend.py:graph", "budget": {
        "max_cost_usd": 0.25, "on_limit": "pause"}}, root=tmp_path)
    resolved = services.budget_of(spec, services.RunOptions())
    assert resolved.limit("max_cost_usd") == 0.25 and resolved.action("max_cost_usd") == "pause"
    with pytest.raises(ConfigError, match="budget"):
        graph_spec("spend", {"path": "./spend.py:graph", "budget": 5}, root=tmp_path)
    bad = graph_spec("spend", {"path": "./spend.py:graph", "budget": {"max_cost": 1}},
                     root=tmp_path)
    with pytest.raises(services.BudgetError, match=r"graph 'spend' budget\.max_cost"):
        services.budget_of(bad, services.RunOptions())


@pytest.mark.django_db
def test_an_assistant_with_a_bad_budget_is_refused_with_a_422(client, operator):
    client.force_login(operator)
    made = client.post("/langgraph/assistants", json.dumps({
        "graph_id": budget_graph.NAME, "config": {"configurable": {"budget": {
            "max_cost_usd": 1e9}}}}), content_type="application/json")
    assert made.status_code == 422
    assert "config.configurable.budget.max_cost_usd" in made.content.decode()


def test_the_inbox_lists_runs_waiting_at_their_budget_and_extends_them(
        executor, operator, viewer, client):
    paused = _start(operator, {"max_model_calls": 1, "on_limit": "pause"}, steps=2)
    done = _start(operator, {"max_model_calls": 5}, steps=1)
    client.force_login(operator)
    inbox = client.get("/inbox/").content.decode()
    assert f'id="inbox-budget-{paused.id}"' in inbox
    assert "Model calls budget of 1 reached (1 used)" in inbox
    assert f'id="inbox-budget-{done.id}"' not in inbox
    answered = client.post(f"/runs/{paused.id}/budget/", {
        "action": "extend", "kind": "max_model_calls", "extend": "1", "back": "inbox"})
    assert answered.status_code == 302 and answered["Location"] == "/inbox/"
    assert wait_run(paused.id).status == Run.Status.SUCCEEDED
    assert 'id="inbox-budgets"' not in client.get("/inbox/").content.decode()


def test_a_node_that_catches_its_calls_failures_still_pauses_at_the_refused_call(
        executor, operator):
    """As the decomposition planner's workers do (a failed call is a failed task): the
    refused call passes through their ``except Exception`` as LangGraph's own signals do,
    so the run pauses before the call and, extended, makes it, rather than going on with
    the refusal recorded as the node's answer."""
    run = _start(operator, {"max_model_calls": 2, "on_limit": "pause"}, steps=4,
                 careful=True)
    assert run.state == Run.State.PAUSED and run.model_calls == 2
    assert _last(run).payload["before"] == ["call"]
    services.run_budget_extend(run=run, extend={"max_model_calls": 2}, user=operator)
    run = wait_run(run.id)
    assert run.status == Run.Status.SUCCEEDED and run.model_calls == 4
    assert run.output == {"said": ["call 1", "call 2", "call 3", "call 4"]}


def test_a_run_paused_at_a_refused_call_goes_on_with_that_call_once_extended(
        on_test_model, operator, openai_server, client):
    run = _start(operator, {"max_tokens": 200, "on_limit": "pause"}, steps=3, max_tokens=100)
    assert run.state == Run.State.PAUSED and len(openai_server.requests) == 1
    services.run_budget_extend(run=run, extend={"max_tokens": 1000}, user=operator)
    run = wait_run(run.id)
    assert run.status == Run.Status.SUCCEEDED
    assert len(openai_server.requests) == run.model_calls == 3  # the refused one sent now
    assert len(run.output["said"]) == 3


def test_a_sync_node_s_call_is_held_to_the_budget_too(on_test_model, operator,
                                                       openai_server, chat_graph):
    # think (a sync node, on a worker thread) calls once; reply's call is one too many
    run = services.run_create(graph=chat_graph, input={"messages": [
        {"role": "user", "content": "hi"}]}, user=operator, options=services.RunOptions(
            budget={"max_model_calls": 1}))
    run = wait_run(run.id)
    assert run.status == Run.Status.CANCELLED
    assert len(openai_server.requests) == run.model_calls == 1
    assert _last(run).payload["budget"] == {"kind": "max_model_calls", "limit": 1, "used": 1}


def test_a_run_whose_last_call_reaches_its_budget_has_done_its_work_and_succeeds(
        on_test_model, operator, openai_server):
    run = _start(operator, {"max_tokens": 300, "on_limit": "stop"}, steps=2)
    assert run.status == Run.Status.SUCCEEDED and run.total_tokens == 300
    assert not run.events.filter(kind=Kind.BUDGET_REACHED).exists()
    assert run.events.filter(kind=Kind.BUDGET_WARNING).count() == 1


def test_calls_made_at_once_count_while_in_flight(on_test_model, operator, openai_server):
    openai_server.delay = 0.2  # the three are sent before any answers
    run = _start(operator, {"max_model_calls": 2, "on_limit": "stop"}, steps=1, fan=3)
    assert len(openai_server.requests) == 2  # the third was refused, never sent
    assert run.status == Run.Status.CANCELLED
    assert _last(run).payload["budget"] == {"kind": "max_model_calls", "limit": 2, "used": 2}


def test_a_bad_server_budget_is_a_system_check_error(settings):
    from dashboard.checks import budgets as check

    assert check() == []
    settings.PLANWATCH = {**settings.PLANWATCH, "BUDGET": {"max_tokens": "lots"}}
    (error,) = check()
    assert error.id == "planwatch.E001" and "PLANWATCH_BUDGET.max_tokens" in error.msg


def test_the_trace_socket_redraws_the_budgets_as_they_are_warned_and_reached(executor,
                                                                             operator):
    from asgiref.sync import async_to_sync
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator

    from dashboard.web.routing import websocket_urlpatterns

    application = URLRouter(websocket_urlpatterns)

    run = services.run_create(graph=budget_graph.NAME, input={"steps": 3}, user=operator,
                              options=services.RunOptions(budget={
                                  "max_model_calls": 2, "on_limit": "pause"}))

    async def scenario() -> str:
        comm = WebsocketCommunicator(application, f"/ws/runs/{run.id}/?after=0")
        comm.scope["user"] = operator
        assert (await comm.connect(timeout=5))[0]
        seen = ""
        while "Model calls budget of 2 reached (2 used)" not in seen:
            seen += await comm.receive_from(timeout=20)
        await comm.disconnect()
        return seen

    seen = async_to_sync(scenario)()
    assert 'id="trace-budget" aria-labelledby="trace-budget-title" hx-swap-oob="true"' in seen
    assert 'class="budget-use is-reached" id="budget-max_model_calls"' in seen


DECOMPOSITION_GOAL = {"goal": "Write a short market note", "breadth": 2}


def test_a_decomposition_paused_at_any_call_and_extended_ends_as_if_never_paused(
        executor, operator):
    """Its workers catch their calls' failures (a failed task), its planner and synthesis
    call too: paused before each of its calls in turn, then extended, the run makes every
    call once and ends with the unpaused run's result (4 of the 7 ended "plan failed",
    the refused call recorded as a worker's crash)."""
    free = wait_run(services.run_create(graph="decomposition", input=DECOMPOSITION_GOAL,
                                        user=operator).id)
    assert free.status == Run.Status.SUCCEEDED and free.model_calls > 2
    for calls in range(1, free.model_calls):
        run = wait_run(services.run_create(
            graph="decomposition", input=DECOMPOSITION_GOAL, user=operator,
            options=services.RunOptions(budget={"max_model_calls": calls,
                                                "on_limit": "pause"})).id, PAUSED_OR_DONE)
        assert run.state == Run.State.PAUSED and run.model_calls == calls, calls
        services.run_budget_extend(run=run, extend={"max_model_calls": free.model_calls},
                                   user=operator)
        run = wait_run(run.id)
        assert (run.status, run.outcome, run.model_calls, run.output) == (
            Run.Status.SUCCEEDED, free.outcome, free.model_calls, free.output), calls
