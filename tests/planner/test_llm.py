"""The LLM port: ScriptedLLM, and LangChainLLM over langchain-core's fake chat models."""

from __future__ import annotations

import time
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import (
    FakeListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage
from pydantic import BaseModel

import planner.acquisition  # noqa: F401  (registers the acquisition.decide answers)
from planner.acquisition.prompting import PlannerDecision
from planner.llm import LangChainLLM, LLMError, ScriptedLLM, make_llm, scripted_responder


class Echo(BaseModel):
    word: str


@scripted_responder("test.echo")
def _echo(context: Any) -> dict[str, str]:
    return {"word": context["word"]}


class ToolCallingFake(GenericFakeChatModel):
    """GenericFakeChatModel plus bind_tools, so langchain-core's own
    ``with_structured_output`` (tool calling + PydanticToolsParser) runs for real."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFake:
        return self


def tool_call(name: str, args: dict[str, Any]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "call-1"}])


def fake_factory() -> FakeListChatModel:
    """Used by make_llm through 'tests.planner.test_llm:fake_factory'."""
    return FakeListChatModel(responses=["hello"])


async def test_scripted_answers_come_from_registered_responders() -> None:
    llm = ScriptedLLM()
    answer = await llm.astructured(purpose="test.echo", prompt="", schema=Echo,
                                   context={"word": "hi"})
    assert answer == Echo(word="hi")
    assert llm.calls == [("test.echo", {"word": "hi"})]
    assert await llm.atext(purpose="test.echo", prompt="", context={"word": "x"}) == \
        '{"word": "x"}'


async def test_scripted_failures_and_malformed_output_raise_llm_error() -> None:
    with pytest.raises(LLMError, match="scripted failure"):
        await ScriptedLLM(fail={"test.echo"}).astructured(
            purpose="test.echo", prompt="", schema=Echo, context={"word": "a"})
    with pytest.raises(LLMError, match="does not fit Echo"):
        await ScriptedLLM(malformed={"test.echo"}).astructured(
            purpose="test.echo", prompt="", schema=Echo, context={"word": "a"})


async def test_unknown_purpose_names_the_scripted_ones() -> None:
    with pytest.raises(LLMError, match=r"no scripted answer for 'nope'.*acquisition\.decide"):
        await ScriptedLLM().atext(purpose="nope", prompt="", context={})


async def test_overrides_and_think_time() -> None:
    llm = ScriptedLLM(overrides={"test.echo": {"word": "fixed"}}, think_time=0.05)
    began = time.perf_counter()
    answer = await llm.astructured(purpose="test.echo", prompt="", schema=Echo,
                                   context={"word": "ignored"})
    assert answer.word == "fixed" and time.perf_counter() - began >= 0.05


async def test_scripted_acquisition_model_searches_then_asks_then_finishes() -> None:
    llm = ScriptedLLM()
    fields = [
        {"name": "market.population", "label": "Population", "strategy": "web",
         "missing": True, "next_step": "search",
         "query_templates": ["Germany population 2024", "total population of Germany"]},
        {"name": "market.price", "label": "Yearly price", "strategy": "ask", "missing": True,
         "next_step": "ask_user", "query_templates": []},
    ]

    async def ask(context: dict[str, Any]) -> PlannerDecision:
        return await llm.astructured(purpose="acquisition.decide", prompt="",
                                     schema=PlannerDecision, context=context)

    first = await ask({"fields": fields, "queries_run": []})
    assert (first.action, first.query) == ("search", "Germany population 2024")
    second = await ask({"fields": fields, "queries_run": ["germany population 2024"]})
    assert second.query == "total population of Germany"
    fields[0]["missing"] = False
    assert (await ask({"fields": fields, "queries_run": []})).action == "ask_user"
    fields[1]["missing"] = False
    assert (await ask({"fields": fields, "queries_run": []})).action == "finish"


async def test_langchain_adapter_uses_structured_output_via_tool_calls() -> None:
    args = {"action": "search", "field": "market.population", "query": "Japan population"}
    model = ToolCallingFake(messages=iter([tool_call("PlannerDecision", args)]))
    answer = await LangChainLLM(model).astructured(purpose="acquisition.decide", prompt="p",
                                                   schema=PlannerDecision, context={})
    assert answer == PlannerDecision(**args)


async def test_langchain_adapter_turns_bad_tool_arguments_into_llm_error() -> None:
    model = ToolCallingFake(messages=iter([tool_call("PlannerDecision", {"action": "fly"})]))
    with pytest.raises(LLMError, match=r"acquisition\.decide: model call failed"):
        await LangChainLLM(model).astructured(purpose="acquisition.decide", prompt="p",
                                              schema=PlannerDecision, context={})


async def test_langchain_adapter_falls_back_to_json_without_structured_output() -> None:
    model = FakeListChatModel(responses=['```json\n{"action": "finish", "reason": "ok"}\n```'])
    answer = await LangChainLLM(model).astructured(purpose="p", prompt="p",
                                                   schema=PlannerDecision, context={})
    assert answer == PlannerDecision(action="finish", reason="ok")


async def test_langchain_adapter_rejects_non_json_replies() -> None:
    model = FakeListChatModel(responses=["I would search for the population."])
    with pytest.raises(LLMError, match="does not fit PlannerDecision"):
        await LangChainLLM(model).astructured(purpose="p", prompt="p",
                                              schema=PlannerDecision, context={})


async def test_langchain_adapter_text_and_model_failures() -> None:
    llm = LangChainLLM(GenericFakeChatModel(messages=iter(["<plan/>"])))
    assert await llm.atext(purpose="p", prompt="p", context={}) == "<plan/>"
    with pytest.raises(LLMError, match="model call failed"):
        await llm.atext(purpose="p", prompt="p", context={})  # the fake has run dry


def test_make_llm_builds_scripted_or_a_langchain_factory() -> None:
    assert isinstance(make_llm("scripted", think_time=0.5), ScriptedLLM)
    adapter = make_llm("tests.planner.test_llm:fake_factory")
    assert isinstance(adapter, LangChainLLM)
    assert isinstance(adapter.model, FakeListChatModel)
    with pytest.raises(ValueError, match="unsupported LLM setting 'gpt'"):
        make_llm("gpt")


def test_make_llm_builds_a_providers_model_by_name(monkeypatch) -> None:
    from langchain_openai import ChatOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the provider's usual variable
    adapter = make_llm("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1")
    assert isinstance(adapter.model, ChatOpenAI)
    assert adapter.model.model_name == "gpt-4o-mini"
    assert adapter.model.openai_api_base == "http://127.0.0.1:9/v1"
    with pytest.raises(ValueError, match="unsupported LLM setting 'nosuch:model'"):
        make_llm("nosuch:model")
