"""Model calls in the run's log: every call of any chat model, with its tokens and cost."""

from __future__ import annotations

import json

import pytest

from dashboard import services
from dashboard.models import Run, RunEvent
from tests.conftest import assert_gapless, wait_run
from tests.openai_server import DECISION, MODEL, REPLY
from tests.support.models import CALL_COST

pytestmark = pytest.mark.pg

Kind = RunEvent.Kind


def _calls(run: Run) -> tuple[list[RunEvent], list[RunEvent]]:
    events = assert_gapless(run)
    return ([e for e in events if e.kind == Kind.MODEL_STARTED],
            [e for e in events if e.kind == Kind.MODEL_FINISHED])


def test_the_scripted_model_records_each_call_with_purpose_prompt_and_answer(executor,
                                                                          operator):
    run = services.run_create(graph="acquisition",
                              input={"region": "Germany", "currency": "EUR"}, user=operator)
    run = wait_run(run.id)
    started, finished = _calls(run)
    assert len(started) == len(finished) == run.model_calls >= 2
    decide = run.events.get(kind=Kind.NODE_STARTED, task_id=started[0].task_id)
    assert (started[0].node, started[0].step) == ("decide", decide.step)
    first = started[0].payload
    assert (first["model"], first["provider"], first["purpose"], first["kind"]) == (
        "scripted", "planwatch", "acquisition.decide", "chat")
    assert first["messages"][0]["role"] == "human"
    assert "Choose ONE next action" in first["messages"][0]["content"]
    done = finished[0].payload
    assert done["call_id"] == first["call_id"] and done["error"] is None
    assert done["output"]["structured"]["action"] == "search"
    assert json.loads(done["output"]["text"]) == done["output"]["structured"]
    # the scripted model reports no usage: "not reported", never 0
    assert done["usage"] is None and done["cost"] is None
    assert finished[0].duration_ms == done["latency_ms"] > 0
    assert (run.input_tokens, run.total_tokens, run.cost_usd) == (None, None, None)


def test_trace_content_false_keeps_only_the_metadata(executor, operator, settings):
    settings.PLANWATCH = {**settings.PLANWATCH, "TRACE_CONTENT": False}
    run = wait_run(services.run_create(graph="acquisition", input={
        "region": "Germany", "currency": "EUR"}, user=operator).id)
    started, finished = _calls(run)
    assert started[0].payload["messages"] == [{"role": "human", "content": "",
                                               "truncated": True}]
    assert finished[0].payload["output"]["text"] == ""
    assert finished[0].payload["output"]["structured"] is None
    assert finished[0].payload["purpose"] == "acquisition.decide"


def test_long_texts_are_cut_at_the_limit_and_marked(executor, operator, settings):
    settings.PLANWATCH = {**settings.PLANWATCH, "TRACE_CONTENT_LIMIT": 50}
    run = wait_run(services.run_create(graph="acquisition", input={
        "region": "Germany", "currency": "EUR"}, user=operator).id)
    started, finished = _calls(run)
    message = started[0].payload["messages"][0]
    assert len(message["content"]) == 50 and message["truncated"] is True
    assert finished[0].payload["output"]["truncated"] is True


def test_an_acquisition_run_on_chatopenai_records_tokens_and_cost(on_test_model, operator,
                                                                  openai_server):
    run = wait_run(services.run_create(graph="acquisition", input={
        "region": "Germany", "currency": "EUR"}, user=operator).id)
    assert run.status == Run.Status.INTERRUPTED  # the model asked for the price
    started, finished = _calls(run)
    assert len(started) == len(finished) == 1 == len(openai_server.requests)
    call = finished[0].payload
    assert (call["model"], call["provider"], call["purpose"]) == (
        MODEL, "openai", "acquisition.decide")
    assert call["usage"] == {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150,
                             "cached_tokens": 20}
    assert call["cost"]["total"] == pytest.approx(CALL_COST)
    assert call["cost"]["currency"] == "USD"
    answer = call["output"]["structured"] or json.loads(call["output"]["text"])
    assert answer == DECISION or call["output"]["tool_calls"][0]["args"] == DECISION
    assert (run.model_calls, run.input_tokens, run.output_tokens, run.total_tokens) == (
        1, 120, 30, 150)
    assert run.cost_usd == pytest.approx(CALL_COST)


@pytest.mark.parametrize("graph", ["acquisition", "decomposition"])
def test_both_planners_run_on_a_provider_model_named_in_one_setting(
        executor, openai_server, operator, settings, monkeypatch, graph):
    from dashboard.runs.dispatch import get_executor, reset_executor

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings.PLANWATCH = {**settings.PLANWATCH, "LLM": f"openai:{MODEL}",
                          "LLM_BASE_URL": openai_server.url}
    reset_executor()
    get_executor()
    goal = ({"region": "Germany", "currency": "EUR"} if graph == "acquisition"
            else {"goal": "Plan a small launch"})
    run = wait_run(services.run_create(graph=graph, input=goal, user=operator).id)
    reset_executor()
    assert run.status != Run.Status.FAILED, run.error_message
    _started, finished = _calls(run)
    assert finished and len(openai_server.requests) == len(finished)
    assert {e.payload["model"] for e in finished} == {MODEL}
    assert all(r["model"] == MODEL for r in openai_server.requests)


def test_a_langgraph_json_graph_calling_chatopenai_is_traced_sync_and_streamed(
        on_test_model, operator, chat_graph):
    run = wait_run(services.run_create(graph=chat_graph, input={
        "messages": [{"role": "user", "content": "Say hello"}]}, user=operator).id)
    assert run.status == Run.Status.SUCCEEDED, run.error_message
    started, finished = _calls(run)
    assert [e.node for e in started] == [e.node for e in finished] == ["think", "reply"]
    think, reply = (e.payload for e in finished)
    assert started[0].payload["messages"] == [{"role": "human", "content": "Say hello"}]
    assert started[1].payload["messages"][-1] == {"role": "ai", "content": REPLY}
    assert think["output"]["text"] == reply["output"]["text"] == REPLY
    assert think["ttft_ms"] is None and reply["ttft_ms"] is not None  # streamed
    assert reply["usage"]["total_tokens"] == 150 and think["purpose"] is None
    assert (run.model_calls, run.total_tokens) == (2, 300)
    assert run.cost_usd == pytest.approx(2 * CALL_COST)


def test_a_failed_call_is_recorded_with_its_error(on_test_model, operator, openai_server):
    openai_server.stop()  # nobody answers: the client's connection error is the call's
    run = wait_run(services.run_create(graph="acquisition", input={
        "region": "Germany", "currency": "EUR"}, user=operator).id)
    _, finished = _calls(run)
    assert finished and finished[0].payload["error"]
    assert finished[0].payload["usage"] is None and run.model_calls == len(finished)
    assert run.events.filter(kind=Kind.NODE_FINISHED, node="decide").exists()


@pytest.fixture
def priced_run(on_test_model, operator):
    """An acquisition run on ChatOpenAI (one priced call), paused on the price question."""
    return wait_run(services.run_create(graph="acquisition", input={
        "region": "Germany", "currency": "EUR"}, user=operator).id)


def test_the_api_run_detail_gives_tokens_and_cost_per_run_and_node(priced_run, operator,
                                                                    client):
    client.force_login(operator)
    body = client.get(f"/api/runs/{priced_run.id}/").json()
    assert (body["model_calls"], body["input_tokens"], body["output_tokens"],
            body["total_tokens"]) == (1, 120, 30, 150)
    assert body["cost_usd"] == pytest.approx(CALL_COST)
    (decide,) = body["model_usage"]
    assert (decide["node"], decide["model_calls"], decide["total_tokens"]) == ("decide", 1, 150)
    assert decide["cost_usd"] == pytest.approx(CALL_COST)


def test_the_export_holds_every_event_and_every_model_call(priced_run, operator, client):
    client.force_login(operator)
    response = client.get(f"/api/runs/{priced_run.id}/export/")
    doc = json.loads(b"".join(response))  # streamed (constant memory)
    assert doc["planwatch_export"] == 1
    assert [e["seq"] for e in doc["events"]] == list(range(1, priced_run.last_seq + 1))
    (call,) = doc["model_calls"]
    assert call["node"] == "decide" and call["finished"] is True
    assert call["usage"]["total_tokens"] == 150 and call["messages"][0]["role"] == "human"
    assert doc["header"]["total_tokens"] == 150 and doc["header"]["status"] == "interrupted"
    assert doc["inputs"]["input"] == priced_run.input  # as the graph took it
    assert doc["interrupts"][0]["status"] == "pending"
    assert {c["checkpoint_id"] for c in doc["checkpoints"]} == {
        e["checkpoint_id"] for e in doc["events"] if e["kind"] == "checkpoint"}


def test_the_trace_header_and_the_runs_list_show_tokens_and_cost(priced_run, operator,
                                                                  client):
    client.force_login(operator)
    page = client.get(f"/runs/{priced_run.id}/").content.decode()
    assert 'id="trace-tokens"' in page and "<b>150</b>" in page and "(120 in · 30 out)" in page
    assert f"${CALL_COST:.4f}".rstrip("0") in page
    assert f'/api/runs/{priced_run.id}/export/' in page
    listed = client.get("/?sort=-cost_usd").content.decode()
    row = listed.split(f'id="run-{priced_run.id}"')[1].split("</tr>")[0]
    assert ">150<" in row and f"${CALL_COST:.4f}".rstrip("0") in row
    assert 'aria-sort="descending"' in listed


def test_the_runs_list_sorts_by_cost_with_unknown_cost_last(priced_run, operator, client):
    scripted = Run.objects.create(graph="acquisition", thread_id="unpriced:planner",
                                  model_calls=3)
    cheap = Run.objects.create(graph="acquisition", thread_id="cheap:planner",
                               model_calls=1, total_tokens=10, cost_usd=0.000001)
    client.force_login(operator)
    html = client.get("/?sort=-cost_usd").content.decode()
    order = [html.index(f'id="run-{r.id}"') for r in (priced_run, cheap, scripted)]
    assert order == sorted(order)
    html = client.get("/?sort=cost_usd").content.decode()
    order = [html.index(f'id="run-{r.id}"') for r in (cheap, priced_run, scripted)]
    assert order == sorted(order)
    assert "unknown" in html.split(f'id="run-{scripted.id}"')[1].split("</tr>")[0]


def test_usage_sums_by_graph_and_by_day(priced_run):
    from dashboard import selectors

    Run.objects.create(graph="acquisition", thread_id="other:planner", model_calls=2)
    (acq,) = [g for g in selectors.model_usage_by_graph() if g["graph"] == "acquisition"]
    assert (acq["runs"], acq["model_calls"], acq["total_tokens"]) == (2, 3, 150)
    assert acq["cost_usd"] == pytest.approx(CALL_COST)
    (today,) = selectors.model_usage_by_day(graph="acquisition")
    assert today["model_calls"] == 3 and today["day"] == priced_run.created_at.date()


def test_the_admin_lists_calls_tokens_and_cost(priced_run, client, django_user_model):
    admin = django_user_model.objects.create_superuser("root", password="x")
    client.force_login(admin)
    html = client.get("/admin/dashboard/run/").content.decode()
    assert "column-total_tokens" in html and "column-cost_usd" in html
    assert ">150<" in html
