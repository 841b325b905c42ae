"""The planners' chat transcript (``messages``): goal, questions, answers, result in words."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.types import Command

from planner.acquisition import make_input as acquisition_input
from planner.chat import add_message_json, opening_messages
from planner.registry import get_graph
from planner.spec import InputError
from tests.support.acquisition import compile_graph
from tests.support.decomposition import Run


def said(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(type, first line) of each message, every one of which has an id."""
    assert all(m["id"] for m in messages) and len({m["id"] for m in messages}) == len(messages)
    return [(m["type"], str(m["content"]).splitlines()[0]) for m in messages]


async def test_acquisition_transcript_asks_in_chat_and_ends_with_the_figure() -> None:
    graph = compile_graph()
    config = {"configurable": {"thread_id": "chat-1"}, "recursion_limit": 500}
    start = get_graph("acquisition").chat_input(
        {"messages": [{"type": "human", "content": "Size budgeting apps in Germany",
                       "id": "client-1"}]})
    await graph.ainvoke(acquisition_input(start), config)
    state = await graph.aget_state(config)
    assert state.values["goal"] == "Size budgeting apps in Germany"
    # waiting on the region: its question is the last message, beside the interrupt
    assert state.interrupts and state.interrupts[0].value["field"] == "core.region"
    assert said(state.values["messages"]) == [
        ("human", "Size budgeting apps in Germany"),
        ("ai", "Which region should the market be sized for?")]
    assert state.values["messages"][0]["id"] == "client-1"  # the client's own message
    assert state.values["messages"][1]["content"].endswith("\n\nSuggested: Germany.")
    for answer in ("Germany", "EUR", "47.88"):
        await graph.ainvoke(Command(resume=answer), config)
    state = await graph.aget_state(config)
    assert not state.next
    messages = state.values["messages"]
    assert said(messages)[1:7] == [
        ("ai", "Which region should the market be sized for?"),
        ("human", "Germany"),
        ("ai", "Which currency should prices and the TAM use (ISO 4217 code)?"),
        ("human", "EUR"),
        ("ai", "What yearly price per user of budgeting apps (in EUR) should we assume?"),
        ("human", "47.88")]
    final = messages[-1]
    assert final["type"] == "ai" and len(messages) == 8
    assert final["content"].startswith("TAM ") and " EUR a year." in final["content"]
    assert "TAM = population \u00d7 adoption rate \u00d7 yearly price = " in final["content"]


async def test_a_refused_answer_is_said_in_the_next_question() -> None:
    graph = compile_graph()
    config = {"configurable": {"thread_id": "chat-2"}, "recursion_limit": 500}
    await graph.ainvoke(acquisition_input({}), config)
    await graph.ainvoke(Command(resume="Atlantis"), config)
    messages = (await graph.aget_state(config)).values["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "human", "ai"]
    assert messages[2]["content"] == "Atlantis"
    again = messages[3]["content"]
    assert again.startswith("The last answer was refused: unknown region 'Atlantis'")
    # ~250 countries are choices of the form, not prose in the chat
    assert "Zimbabwe" not in again and "Any of 249 choices; type to search them." in again


def test_opening_messages_give_ids_and_refuse_what_is_not_a_message() -> None:
    [goal] = opening_messages(None, "a goal")
    assert (goal["type"], goal["content"]) == ("human", "a goal") and goal["id"]
    [sent] = opening_messages([{"role": "user", "content": "hi"}], "hi")
    assert sent["type"] == "human" and sent["id"]
    with pytest.raises(InputError) as caught:
        opening_messages([{"type": "wizard", "content": "x"}], "x")
    assert "messages" in caught.value.errors
    # the reducer is LangGraph's add_messages: a message with a known id replaces it
    merged = add_message_json([goal], [{**goal, "content": "changed"}])
    assert [m["content"] for m in merged] == ["changed"]


async def test_decomposition_transcript_holds_its_questions_answers_and_synthesis() -> None:
    run = Run()
    start = get_graph("decomposition").chat_input(
        {"messages": [{"type": "human", "content": "Brief the council on solar"}],
         "ask_clarifications": True, "plan_form": "lcdl_pack"})
    state = await run.go(_input(start))
    assert state.values["goal"] == "Brief the council on solar"
    assert said(state.values["messages"]) == [
        ("human", "Brief the council on solar"),
        ("ai", "Who is the audience of the briefing?"),
        ("ai", "What tone should the briefing take?")]
    answers = {i.id: "residents" if i.value["task_id"] == "5" else "warm"
               for i in state.interrupts}
    state = await run.go(Command(resume=answers))
    assert state.values["status"] == "done"
    kinds = said(state.values["messages"])
    assert sorted(kinds[3:5]) == [("human", "residents"), ("human", "warm")]
    assert kinds[-1][0] == "ai" and state.values["messages"][-1]["content"] == (
        state.values["synthesis"])


def _input(values: Any) -> Any:
    from planner.decomposition import make_input
    return make_input(values)
