"""Forks with another model or prompt, run for real (executor, savers, the scripted model
and the loopback OpenAI-compatible server), and their comparison side by side."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from dashboard import comparisons, services
from dashboard.models import Run, RunEvent
from tests.conftest import wait_run

pytestmark = pytest.mark.pg

Kind = RunEvent.Kind
DONE = ("succeeded", "failed", "cancelled")
GOAL = {"goal": "Write a short market note", "breadth": 2}


@pytest.fixture
def forker(operator):
    operator.user_permissions.add(*Permission.objects.filter(codename="fork_run"))
    return operator


@pytest.fixture
def loopback(openai_server, settings, monkeypatch):
    """``openai:<name>`` reaches the loopback server (its base URL, a key)."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    settings.PLANWATCH = {**settings.PLANWATCH, "LLM_BASE_URL": openai_server.url}
    return openai_server


def calls(run: Run, kind: str = Kind.MODEL_FINISHED) -> list[dict]:
    return list(run.events.filter(kind=kind).order_by("seq").values_list("payload", flat=True))


def before_plan(run: Run) -> str:
    """The root checkpoint the decomposition's first planning call starts from."""
    return run.events.filter(kind=Kind.CHECKPOINT, namespace="",
                             payload__next=["plan"]).order_by("seq").first().checkpoint_id


def test_a_fork_with_another_model_calls_it_and_traces_the_model_it_used(
        executor, forker, loopback):
    parent = wait_run(services.run_create(graph="decomposition", input=GOAL, user=forker).id)
    assert parent.status == "succeeded"
    assert {c["model"] for c in calls(parent)} == {"scripted"}
    child = services.run_fork(
        run=parent, checkpoint_id=before_plan(parent), user=forker,
        options=services.RunOptions(model_settings={
            "model": "openai:fork-model", "temperature": 0.3, "max_tokens": 200}))
    child = wait_run(child.id, statuses=DONE)
    assert child.status == "succeeded", child.error_message
    assert child.model_settings == {"model": "openai:fork-model", "temperature": 0.3,
                                    "max_tokens": 200}
    traced = calls(child)
    assert traced and {c["model"] for c in traced} == {"fork-model"}
    assert all(c["usage"]["total_tokens"] == 150 for c in traced)
    assert child.model_calls == len(traced) and child.total_tokens == 150 * len(traced)
    sent = loopback.requests
    assert len(sent) == len(traced)
    assert {(b["model"], b["temperature"]) for b in sent} == {("fork-model", 0.3)}
    assert {b.get("max_completion_tokens", b.get("max_tokens")) for b in sent} == {200}
    # the parent's calls and model are untouched
    assert {c["model"] for c in calls(Run.objects.get(id=parent.id))} == {"scripted"}


def test_a_fork_with_another_prompt_sends_it_and_its_calls_are_traced(executor, forker):
    parent = wait_run(services.run_create(graph="decomposition", input=GOAL, user=forker).id)
    own = "PLAN THIS, TERSELY: {goal}\n{form_help}{retry_note}"
    child = wait_run(services.run_fork(
        run=parent, checkpoint_id=before_plan(parent), user=forker,
        options=services.RunOptions(model_settings={"prompts": {"plan": own}})).id,
        statuses=DONE)
    assert child.status == "succeeded" and child.output == parent.output
    assert child.model_settings == {"prompts": {"plan": own}}

    def plan_prompts(run: Run) -> list[str]:
        return [m["content"] for c in calls(run, Kind.MODEL_STARTED)
                if c["purpose"] == "decomposition.plan" for m in c["messages"]]

    sent = plan_prompts(child)
    assert sent and all(p.startswith("PLAN THIS, TERSELY: ") for p in sent)
    assert all(p.startswith("Decompose this task") for p in plan_prompts(parent))
    assert {c["model"] for c in calls(child)} == {"scripted"}
    # a resume of the fork (a recovery or an answer) keeps its prompt: it is on the run
    assert Run.objects.values_list("model_settings", flat=True).get(id=child.id)


@pytest.mark.parametrize(("body", "field", "says"), [
    ({"model": "gpt-4o"}, "model", "is no model"),
    ({"model": "acme:big"}, "model", "names no provider 'acme'"),
    ({"model": "os:system"}, "model", "names no provider 'os'"),
    ({"prompts": {"nope": "x"}}, "prompts.nope", "declares no prompt 'nope'"),
    ({"prompts": {"plan": "{secret}"}}, "prompts.plan", "use only"),
    ({"temperature": 9}, "temperature", "out of range"),
    ({"temperature": "warm"}, "temperature", "must be a number"),
    ({"max_tokens": -5}, "max_tokens", "out of range"),
])
def test_bad_fork_options_are_422_naming_the_field_and_start_nothing(
        executor, forker, client, body, field, says):
    parent = wait_run(services.run_create(graph="decomposition", input=GOAL, user=forker).id)
    client.force_login(forker)
    runs = Run.objects.count()
    answer = client.post(f"/api/runs/{parent.id}/fork/",
                         {"checkpoint_id": before_plan(parent), **body},
                         content_type="application/json")
    assert answer.status_code == 422, answer.content
    assert says in answer.json()["errors"][field] and field in answer.json()["detail"]
    assert Run.objects.count() == runs


def test_the_api_forks_with_a_model_and_shows_what_changed(executor, forker, client):
    parent = wait_run(services.run_create(graph="decomposition", input=GOAL, user=forker).id)
    client.force_login(forker)
    made = client.post(f"/api/runs/{parent.id}/fork/", {
        "checkpoint_id": before_plan(parent), "model": "scripted", "temperature": 0.5},
        content_type="application/json")
    assert made.status_code == 201, made.content
    assert made.json()["model_settings"] == {"model": "scripted", "temperature": 0.5}
    child = wait_run(made.json()["id"], statuses=DONE)
    assert client.get(f"/api/runs/{child.id}/").json()["model_settings"] == {
        "model": "scripted", "temperature": 0.5}
    graph = client.get("/api/graphs/decomposition/").json()
    assert [p["name"] for p in graph["prompts"]] == ["plan", "synthesize"]
    assert graph["takes_model"] is True


def test_fork_n_ways_starts_them_all_or_none_and_compares_them(executor, forker, client):
    parent = wait_run(services.run_create(graph="decomposition", input=GOAL, user=forker).id)
    client.force_login(forker)
    checkpoint = before_plan(parent)
    runs = Run.objects.count()
    bad = client.post(f"/api/runs/{parent.id}/fork-ways/", {
        "checkpoint_id": checkpoint, "ways": [{"model": "scripted"}, {"model": "nope"}]},
        content_type="application/json")
    assert bad.status_code == 422 and "is no model" in bad.json()["errors"]["ways.1.model"]
    assert Run.objects.count() == runs
    made = client.post(f"/api/runs/{parent.id}/fork-ways/", {
        "checkpoint_id": checkpoint, "ways": [
            {"model": "scripted"}, {"model": "scripted", "temperature": 1},
            {"prompts": {"synthesize": "In one line: {goal}"}}]},
        content_type="application/json")
    assert made.status_code == 201, made.content
    forks = [wait_run(r["id"], statuses=DONE) for r in made.json()]
    assert [f.parent_id for f in forks] == [parent.id] * 3
    ids = [parent.id, *(f.id for f in forks)]
    compared = client.get("/api/runs/compare/?" + "&".join(f"runs={i}" for i in ids))
    assert compared.status_code == 200, compared.content
    columns = compared.json()
    assert [c["run"]["id"] for c in columns] == [str(i) for i in ids]
    assert [c["reference"] for c in columns] == [True, False, False, False]
    for column, run in zip(columns, [parent, *forks], strict=True):
        run.refresh_from_db()
        assert column["outcome"] == "succeeded" and column["active"] is False
        assert column["figures"]["model_calls"] == run.model_calls > 0
        assert column["models"] == ["scripted"]
        assert column["figures"]["elapsed_seconds"] >= column["figures"]["working_seconds"] > 0
    assert [c["divergence"] for c in columns[1:]] == [None, None, None]  # same decisions
    one = client.get(f"/api/runs/compare/?runs={parent.id}")
    assert one.status_code == 400 and "runs" in one.json()["errors"]


def test_the_first_divergent_decision_is_found():
    assert comparisons.first_divergence(["a", "b", "c"], ["a", "x", "c"]) == 1
    assert comparisons.first_divergence(["a", "b"], ["a", "b"]) is None
    assert comparisons.first_divergence(["a", "b"], ["a", "b", "c"]) == 2
    assert comparisons.first_divergence([], ["a"]) == 0


def test_the_fork_page_takes_a_model_and_prompts_and_refuses_bad_ones_with_422(
        executor, forker, client):
    parent = wait_run(services.run_create(graph="decomposition", input=GOAL, user=forker).id)
    client.force_login(forker)
    checkpoint = before_plan(parent)
    url = f"/runs/{parent.id}/fork/?checkpoint={checkpoint}"
    page = client.get(url)
    assert page.status_code == 200 and b'name="m-prompt_plan"' in page.content
    state = page.context["form"]  # the state as it stands, unedited
    unedited = {name: state[name].value() for name in state.fields
                if state[name].value() is not None}
    runs = Run.objects.count()
    bad = client.post(url, {**unedited, "checkpoint": checkpoint, "action": "fork",
                            "m-model": "acme:big", "m-temperature": "7"})
    assert bad.status_code == 422
    assert "names no provider" in bad.context["model_form"].errors["model"][0]
    assert "out of range" in bad.context["model_form"].errors["temperature"][0]
    assert Run.objects.count() == runs
    good = client.post(url, {**unedited, "checkpoint": checkpoint, "action": "fork",
                             "m-model": "scripted", "m-max_tokens": "64",
                             "m-prompt_plan": get_plan_template() + " Be brief."})
    assert good.status_code == 302, good.content
    child = Run.objects.exclude(id=parent.id).get()
    assert child.model_settings == {"model": "scripted", "max_tokens": 64,
                                    "prompts": {"plan": get_plan_template() + " Be brief."}}
    shown = client.get(f"/runs/{child.id}/")
    assert b'id="trace-model-settings"' in shown.content and b"scripted" in shown.content


def test_the_fork_ways_page_opens_the_comparison_which_polls_while_they_run(
        executor, forker, client):
    parent = wait_run(services.run_create(graph="decomposition", input=GOAL, user=forker).id)
    client.force_login(forker)
    checkpoint = before_plan(parent)
    url = f"/runs/{parent.id}/fork/?checkpoint={checkpoint}"
    bad = client.post(url, {"checkpoint": checkpoint, "action": "ways",
                            "w-way1_model": "scripted", "w-way3_model": "what"})
    assert bad.status_code == 422
    assert "is no model" in bad.context["ways_form"].errors["way3_model"][0]
    made = client.post(url, {"checkpoint": checkpoint, "action": "ways",
                             "w-way1_model": "scripted", "w-way2_model": "scripted",
                             "w-way2_temperature": "0.9", "w-way3_model": "scripted"})
    assert made.status_code == 302 and made["Location"].startswith("/runs/compare/?runs=")
    forks = list(Run.objects.filter(parent=parent))
    assert len(forks) == 3
    page = client.get(made["Location"])
    assert page.status_code == 200
    assert page.content.count(b"/runs/") >= 4 and b"First divergent decision" in page.content
    for fork in forks:
        wait_run(fork.id, statuses=DONE)
    done = client.get(made["Location"], HTTP_HX_REQUEST="true")
    assert b'id="compare-runs"' in done.content and b"every 2s" not in done.content
    assert b"<html" not in done.content
    tree = client.get(f"/runs/compare/?tree={forks[0].id}")
    assert tree.status_code == 200 and len(tree.context["columns"]) == 4


def get_plan_template() -> str:
    from planner.registry import get_graph

    return get_graph("decomposition").prompts["plan"].template


def test_the_langgraph_api_forks_with_the_model_and_prompt_its_configurable_names(
        executor, forker, loopback):
    from django.test import Client

    from tests.conftest import api_token

    forker.user_permissions.add(*Permission.objects.filter(codename="view_all_threads"))
    token = api_token(forker)
    lg = Client(headers={"x-api-key": token})
    thread = lg.post("/langgraph/threads", {}, content_type="application/json").json()
    tid = thread["thread_id"]
    first = lg.post(f"/langgraph/threads/{tid}/runs",
                    {"assistant_id": "decomposition", "input": GOAL},
                    content_type="application/json")
    assert first.status_code == 200, first.content
    parent = wait_run(first.json()["run_id"], statuses=DONE)
    checkpoint = before_plan(parent)
    bad = lg.post(f"/langgraph/threads/{tid}/runs", {
        "assistant_id": "decomposition", "checkpoint_id": checkpoint,
        "config": {"configurable": {"model": "acme:x", "prompts": {"nope": "x"}}}},
        content_type="application/json")
    assert bad.status_code == 422, bad.content
    assert "config.configurable.model" in bad.content.decode()
    assert "config.configurable.prompts.nope" in bad.content.decode()
    made = lg.post(f"/langgraph/threads/{tid}/runs", {
        "assistant_id": "decomposition", "checkpoint_id": checkpoint,
        "config": {"configurable": {"model": "openai:lg-model", "temperature": 0.1,
                                    "prompts": {"synthesize": "Sum up: {goal}"}}}},
        content_type="application/json")
    assert made.status_code == 200, made.content
    wait_run(made.json()["run_id"], statuses=DONE)
    fork = Run.objects.filter(conversation_id=tid).exclude(id=parent.id).get()
    assert fork.model_settings == {"model": "openai:lg-model", "temperature": 0.1,
                                   "prompts": {"synthesize": "Sum up: {goal}"}}
    assert {c["model"] for c in calls(fork)} == {"lg-model"}
    assert any(m["content"] == f"Sum up: {GOAL['goal']}"
               for c in calls(fork, Kind.MODEL_STARTED) for m in c["messages"])


def test_the_comparison_names_the_first_divergent_step_and_polls_while_a_run_waits(
        executor, forker, client):
    parent = wait_run(services.run_create(graph="test.echo", input={"steps": 3},
                                          user=forker).id)
    after_first = parent.events.filter(kind=Kind.CHECKPOINT, namespace="",
                                       payload__next=["step"]).order_by("seq")[1]
    short = wait_run(services.run_fork(run=parent, checkpoint_id=after_first.checkpoint_id,
                                       user=forker, values={"steps": 1}, as_node="step").id,
                     statuses=DONE)
    waiting = wait_run(services.run_create(graph="test.echo", input={"steps": 2, "ask": True},
                                           user=forker).id)
    assert waiting.status == "interrupted"
    columns = comparisons.runs_compare(runs=[parent, short, waiting])
    assert comparisons.decisions_of(parent) == ["step", "step", "step", "done"]
    assert comparisons.decisions_of(short) == ["step", "done"]  # its parent's first step
    assert (columns[1].divergence, columns[1].divergent_decision,
            columns[1].reference_decision) == (1, "done", "step")
    assert columns[2].active and not columns[1].active
    client.force_login(forker)
    url = f"/runs/compare/?runs={parent.id}&runs={short.id}&runs={waiting.id}"
    live = client.get(url, HTTP_HX_REQUEST="true")
    assert b'hx-trigger="every 2s"' in live.content  # one of them still waits
    assert b"step 2:" in live.content and b"&quot;done&quot;" in live.content
    ended = client.get(f"/runs/compare/?runs={parent.id}&runs={short.id}")
    assert b"every 2s" not in ended.content


def test_only_runs_one_may_read_are_compared(executor, forker, client, django_user_model):
    theirs = wait_run(services.run_create(graph="test.echo", input={"steps": 1},
                                          user=forker).id)
    fork = wait_run(services.run_fork(
        run=theirs, checkpoint_id=theirs.events.filter(kind=Kind.CHECKPOINT).first()
        .checkpoint_id, user=forker).id, statuses=DONE)
    stranger = django_user_model.objects.create_user(username="sam", password="pw-sam-12345")
    stranger.user_permissions.set(Permission.objects.filter(codename="fork_run"))
    client.force_login(stranger)
    assert client.get(f"/runs/compare/?runs={theirs.id}&runs={fork.id}").status_code == 404
    assert client.get(f"/runs/compare/?tree={fork.id}").status_code == 404
    assert client.get(f"/api/runs/compare/?runs={theirs.id}&runs={fork.id}").status_code == 404
    refused = client.post(f"/api/runs/{theirs.id}/fork-ways/", {
        "checkpoint_id": fork.forked_from_checkpoint,
        "ways": [{"model": "scripted"}, {"model": "scripted"}]},
        content_type="application/json")
    assert refused.status_code == 404
    client.force_login(forker)
    assert client.get(f"/api/runs/compare/?runs={theirs.id}&runs={fork.id}").status_code == 200
