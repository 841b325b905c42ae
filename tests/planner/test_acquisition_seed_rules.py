"""Seed 000/001 rules that could once break unnoticed: each asserts its observable effect."""

from __future__ import annotations

from typing import Any

from planner.acquisition import actions
from planner.acquisition.policy import apply_policy
from planner.acquisition.profile import MARKET_SIZING
from planner.acquisition.state import decision
from planner.search import SearchHit
from tests.support.acquisition import (
    INPUTS,
    POP,
    PRICE,
    RATE,
    TAM,
    answered,
    blocked,
    ready,
    searched,
)


def _final(state: dict[str, Any], raw: Any, origin: str = "llm") -> tuple[Any, list[str]]:
    final, records, _ = apply_policy(state, MARKET_SIZING, raw, origin)
    return final, [r["name"] for r in records]


def test_web_field_is_searched_before_asking_only_while_unsearched() -> None:
    fresh, rules = _final(ready(), decision("ask_user", POP))
    assert (fresh["action"], rules) == ("search", ["web_search_first"])
    once = ready(searches=searched(POP, "germany population 2024"))
    after, rules = _final(once, decision("ask_user", POP))
    assert (after["action"], after["field"]) == ("ask_user", POP)
    assert "web_search_first" not in rules


def test_the_query_is_filled_before_the_duplicate_check() -> None:
    # The empty query becomes the field's next template, which already ran: only a filled
    # query can be recognised as a duplicate, so fill_query must come first.
    # no search counted for the field, yet its first template query ran (for another field)
    state = ready(searches=searched(RATE, "Germany population 2024"))
    final, rules = _final(state, decision("search", POP, ""))
    assert rules == ["fill_query", "duplicate_query"]
    assert (final["action"], final["field"]) == ("ask_user", POP)


def test_the_query_is_filled_before_the_search_cap() -> None:
    state = ready(searches=searched(POP, "a", "b"))
    final, rules = _final(state, decision("search", POP, ""))
    assert rules == ["fill_query", "search_cap"]
    assert final["action"] == "ask_user"


async def test_reflect_does_not_abort_while_an_input_can_still_be_acquired() -> None:
    state = blocked([PRICE], answers=answered(PRICE, 1))
    state["decision"] = decision("reflect", TAM, reason="blocked")
    update = await actions.reflect(state)  # type: ignore[arg-type]
    assert "status" not in update
    assert update["notes"][0]["acquirable"] == [PRICE]


async def test_reflect_aborts_when_nothing_can_be_acquired() -> None:
    state = blocked([PRICE], answers=answered(PRICE, 3))
    state["decision"] = decision("reflect", TAM, reason="blocked")
    update = await actions.reflect(state)  # type: ignore[arg-type]
    assert update["status"] == "aborted"


async def test_finish_without_a_calculated_tam_is_incomplete() -> None:
    state = ready(values=dict(INPUTS))  # every input, but the calculator never ran
    state["decision"] = decision("finish", reason="done")
    update = await actions.finish(state)  # type: ignore[arg-type]
    assert update["result"]["status"] == "incomplete"
    assert update["result"]["tam"] is None


async def test_the_tam_is_sourced_to_the_calculator() -> None:
    state = ready(values=dict(INPUTS))
    state["decision"] = decision("calculate", TAM)
    update = await actions.calculate(state)  # type: ignore[arg-type]
    assert update["sources"][TAM] == "calculator"
    assert update["values"][TAM] == round(84_500_000 * 0.18 * 47.88, 2)


class Hits:
    """A search port returning fixed hits."""

    def __init__(self, hits: list[SearchHit]) -> None:
        self.hits = hits

    async def asearch(self, query: str, *, field: str | None = None) -> list[SearchHit]:
        return list(self.hits)


async def test_search_uses_the_first_usable_hit_and_ignores_other_fields() -> None:
    hits = [
        SearchHit(title="other field", snippet="", source="s-rate", field=RATE, value=0.2),
        SearchHit(title="no value", snippet="", source="s-none", field=POP, value=None),
        SearchHit(title="first usable", snippet="", source="s-1", field=POP, value=1000),
        SearchHit(title="second usable", snippet="", source="s-2", field=None, value=2000),
    ]
    state = ready()
    state["decision"] = decision("search", POP, "germany population")
    update = await actions.make_search(Hits(hits))(state)  # type: ignore[arg-type]
    assert update["last_observation"]["value"] == 1000
    assert update["last_observation"]["source"] == "s-1"
    assert update["searches"][0]["source"] == "s-1"


async def test_hits_only_for_another_field_are_no_observation() -> None:
    hits = [SearchHit(title="rate", snippet="", source="s", field=RATE, value=0.2)]
    state = ready()
    state["decision"] = decision("search", POP, "germany population")
    update = await actions.make_search(Hits(hits))(state)  # type: ignore[arg-type]
    assert update["last_observation"] is None
    assert update["searches"][0]["hits"] == 1
