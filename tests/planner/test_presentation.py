"""Result cards the graphs declare, built from the output of real (scripted) runs."""

from __future__ import annotations

from planner.acquisition import SPEC as ACQUISITION
from planner.acquisition.presentation import format_amount
from planner.decomposition import SPEC as DECOMPOSITION
from planner.presentation import ResultCard, default_output, generic_result_card
from tests.support.acquisition import compile_graph, drive, start
from tests.support.decomposition import Run


async def test_the_acquisition_card_shows_the_tam_with_its_currency_and_its_inputs() -> None:
    trace = await drive(compile_graph(), start(), ["Germany", "EUR", "47.88"])
    output = ACQUISITION.output_of(trace.values)
    card = ACQUISITION.present_result(output)
    assert card.headline == f"TAM {format_amount(output['tam'], 'EUR')} a year"
    assert card.headline.endswith("million EUR a year")
    by_label = {item.label: item for item in card.items}
    assert by_label["Yearly price"].value == "47.88 EUR a year"
    assert by_label["Yearly price"].source == "answered"
    assert by_label["Region"].value == "Germany" and by_label["Region"].source == "answered"
    assert by_label["Population"].source == "searched"
    assert by_label["Population"].value.endswith("million people")
    assert by_label["Adoption rate"].value == "18%"
    assert by_label["Population"].reference.startswith("Germany: population 2024 (")
    assert card.formula == ("TAM = population \u00d7 adoption rate \u00d7 yearly price = "
                            "84.50 million people \u00d7 18% \u00d7 47.88 EUR a year = "
                            f"{format_amount(output['tam'], 'EUR a year')}")
    assert not any(item.warning for item in card.items)  # the sources are about budgeting apps


async def test_a_source_about_another_topic_than_the_goal_is_flagged() -> None:
    trace = await drive(compile_graph(), start(goal="e-bike rentals in Germany"),
                        ["Germany", "EUR", "0.05"])
    card = ACQUISITION.present_result(ACQUISITION.output_of(trace.values))
    by_label = {item.label: item for item in card.items}
    assert by_label["Yearly price"].value == "0.05 EUR a year"
    assert by_label["Adoption rate"].reference.startswith("Germany: budgeting app adoption")
    assert "not e-bike rentals" in by_label["Adoption rate"].warning
    assert not by_label["Population"].warning  # a population is about people, any goal


async def test_an_operators_edit_of_a_value_is_shown_as_edited_not_as_answered() -> None:
    trace = await drive(compile_graph(), start(), ["Germany", "EUR", "47.88"])
    state = trace.values
    edit = {"values": {**state["values"], "market.price": 60}}
    extra = ACQUISITION.on_state_edit(state, edit)
    # only the changed value is re-sourced; the others keep where they came from
    assert extra == {"sources": {**state["sources"], "market.price": "edited"}}
    # the run then goes on to finish, which reports the state's values and sources
    card = ACQUISITION.present_result({**state["result"], **edit, **extra})
    by_label = {item.label: item for item in card.items}
    assert by_label["Yearly price"].source == "edited by an operator"
    assert by_label["Region"].source == "answered"
    # an edit that sets the sources itself, or changes no value, is left as it is
    assert ACQUISITION.on_state_edit(state, {**edit, "sources": {}}) == {}
    assert ACQUISITION.on_state_edit(state, {"values": dict(state["values"])}) == {}


async def test_the_decomposition_card_shows_the_synthesis_and_the_plan_figures() -> None:
    state = await Run().start(plan_form="writehere_xml")
    output = DECOMPOSITION.output_of(state.values)
    card = DECOMPOSITION.present_result(output)
    assert card.body == state.values["synthesis"] and card.body
    # the card counts the plans' tasks as the task view does: the root is the goal itself
    below_root = [t for t in state.values["tasks"].values() if t.get("parent") is not None]
    finished = sum(t["status"] == "ok" for t in below_root)
    assert card.headline == f"Synthesis of {finished} finished tasks"
    metrics = {m.label: m.value for m in card.metrics}
    assert metrics["rounds"] == "3" and metrics["tasks"] == str(len(below_root))
    assert metrics["tasks ok"] == str(finished)


def test_a_graph_that_declares_nothing_shows_its_final_state() -> None:
    assert default_output({"messages": ["hi"]}) == {"messages": ["hi"]}
    assert default_output({"result": 3, "x": 1}) == 3
    card = generic_result_card({"messages": ["hi"]})
    assert card == ResultCard(headline="Final state", body='{\n  "messages": [\n    "hi"\n  ]\n}')


def test_amounts_read_as_people_write_them() -> None:
    assert format_amount(18_776_745_000.0, "EUR") == "18.78 billion EUR"
    assert format_amount(0.18, share=True) == "18%"
    assert format_amount(0.125, share=True) == "12.5%"
    assert format_amount(0.05, "EUR a year") == "0.05 EUR a year"  # a price, not a rate
    assert format_amount(1530) == "1,530" and format_amount(None) == "—"


def test_a_chat_state_is_shown_as_its_conversation() -> None:
    state = {"messages": [
        {"type": "human", "content": "hello", "id": "1"},
        {"type": "ai", "content": [{"type": "text", "text": "You said: hello"}], "id": "2"},
        {"type": "tool", "content": "42", "id": "3"},
    ], "topic": "greetings"}
    card = generic_result_card(default_output(state))
    assert card.headline == "Conversation of 3 messages; last reply: You said: hello"
    assert [(i.label, i.value) for i in card.items] == [
        ("user", "hello"), ("assistant", "You said: hello"), ("tool", "42")]
    assert '"topic": "greetings"' in card.body and "hello" not in card.body
    # a "messages" channel of something else is shown as the state it is
    other = generic_result_card({"messages": ["not", "messages"]})
    assert other.headline == "Final state" and '"not"' in other.body
