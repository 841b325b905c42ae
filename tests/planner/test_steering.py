"""A fork's model choice: the one rule that checks it, and prompts read from the config."""

from __future__ import annotations

from dataclasses import replace

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from planner.llm import LangChainLLM, make_llm, model_spec_problem
from planner.registry import get_graph
from planner.steering import PromptTemplate, SettingsError, render_prompt

GREET = PromptTemplate(name="greet", label="Greeting", template="Hello {name}",
                       fields=("name",))


@pytest.mark.parametrize(("raw", "field", "says"), [
    ({"model": "nonsense"}, "model", "is no model"),
    ({"model": "acme:big-1"}, "model", "names no provider 'acme'"),
    ({"model": "my.module:factory"}, "model", "names no provider 'my.module'"),
    ({"model": 7}, "model", "is not a model name"),
    ({"temperature": 2.5}, "temperature", "out of range"),
    ({"temperature": -0.1}, "temperature", "out of range"),
    ({"temperature": "hot"}, "temperature", "must be a number from 0 to 2"),
    ({"temperature": float("nan")}, "temperature", "must be a number"),
    ({"max_tokens": 0}, "max_tokens", "out of range"),
    ({"max_tokens": 1.5}, "max_tokens", "whole number"),
    ({"max_tokens": True}, "max_tokens", "whole number"),
    ({"prompts": {"plann": "x"}}, "prompts.plann", "declares no prompt 'plann'"),
    ({"prompts": {"plan": "{goal.__class__}"}}, "prompts.plan", "use only {goal}"),
    ({"prompts": {"plan": "{goal!r}"}}, "prompts.plan", "use only"),
    ({"prompts": {"plan": "open {brace"}}, "prompts.plan", "not a valid template"),
    ({"prompts": ["plan"]}, "prompts", "must be an object"),
    ({"colour": "red"}, "colour", "unknown setting"),
])
def test_a_bad_choice_is_refused_naming_its_field(raw, field, says):
    with pytest.raises(SettingsError) as refused:
        get_graph("decomposition").model_settings(raw)
    assert says in refused.value.errors[field]


def test_a_good_choice_is_kept_as_given_and_an_unchanged_prompt_left_out():
    spec = get_graph("decomposition")
    chosen = spec.model_settings({
        "model": "openai:gpt-4o-mini", "temperature": "0.4", "max_tokens": 300,
        "prompts": {"plan": "Plan {goal}. {form_help}",
                    "synthesize": spec.prompts["synthesize"].template}})
    assert chosen.as_dict() == {"model": "openai:gpt-4o-mini", "temperature": 0.4,
                                "max_tokens": 300, "prompts": {"plan": "Plan {goal}. {form_help}"}}
    assert spec.model_settings({"model": "", "temperature": None}).as_dict() == {}


def test_a_graph_that_makes_its_own_model_calls_takes_no_model():
    spec = get_graph("decomposition")
    with pytest.raises(SettingsError) as refused:
        replace(spec, takes_model=False).model_settings({"model": "scripted"})
    assert "makes its own model calls" in refused.value.errors["model"]


def test_the_model_syntax_is_plan_watch_llms():
    assert model_spec_problem("scripted") == ""
    assert model_spec_problem("openai:gpt-4o-mini") == ""
    assert "not installed" in model_spec_problem("anthropic:claude-sonnet-4-5")
    assert "is no model" in model_spec_problem("openai:")


def test_the_planners_declare_their_prompts():
    assert set(get_graph("decomposition").prompts) == {"plan", "synthesize"}
    assert set(get_graph("acquisition").prompts) == {"decide"}


async def test_a_node_renders_the_runs_own_prompt_from_its_config():
    class State(TypedDict):
        name: str
        said: str

    async def speak(state: State) -> dict[str, str]:
        return {"said": render_prompt(GREET, name=state["name"])}

    builder = StateGraph(State)
    builder.add_node("speak", speak)
    builder.add_edge(START, "speak")
    builder.add_edge("speak", END)
    graph = builder.compile()
    plain = await graph.ainvoke({"name": "Ada"})
    own = await graph.ainvoke({"name": "Ada"},
                              {"configurable": {"prompts": {"greet": "Hi {name}!"}}})
    assert (plain["said"], own["said"]) == ("Hello Ada", "Hi Ada!")
    assert render_prompt(GREET, name="Bo") == "Hello Bo"  # outside a run: the template


def test_a_providers_model_named_like_an_attribute_of_its_package_is_the_model(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("PLANWATCH_TEST_OPENAI_URL", "http://127.0.0.1:9/v1")
    built = make_llm("openai:chat", base_url="http://127.0.0.1:9/v1", temperature=0.5,
                     max_tokens=7)
    assert isinstance(built, LangChainLLM)  # not the openai package's ``chat`` called
    assert (built.model.model_name, built.model.temperature, built.model.max_tokens) == (
        "chat", 0.5, 7)
    assert isinstance(make_llm("tests.openai_server:chat_model"), LangChainLLM)
