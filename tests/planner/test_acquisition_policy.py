"""The deterministic rules one by one: select's order, decision_policy's rewrites, routers."""

from __future__ import annotations

import copy
import dataclasses
import inspect
from typing import Any

import pytest

from planner.acquisition import actions, nodes, routers
from planner.acquisition.policy import apply_policy, select_decision
from planner.acquisition.profile import MARKET_SIZING, Profile
from planner.acquisition.state import decision
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
    succeeded,
)

# -- select: first match wins ------------------------------------------------------------


def test_select_calculator_cap_comes_first() -> None:
    for state in (succeeded(calc_runs=3), blocked([PRICE], runs=3)):
        d, rule = select_decision(state, MARKET_SIZING)
        assert (d["action"], rule) == ("finish", "calculator_cap_exhausted")
        assert d["reason"] == "the calculator ran 3 times, its cap of 3"


def test_select_finishes_when_calculator_succeeded_on_current_inputs() -> None:
    d, rule = select_decision(succeeded(), MARKET_SIZING)
    assert (d, rule) == ({"action": "finish", "field": TAM, "query": None,
                          "reason": f"{TAM} was calculated from the current inputs"},
                         "calculator_succeeded")


def test_select_does_not_trust_a_success_on_changed_inputs() -> None:
    state = succeeded()
    state["values"] = {**state["values"], PRICE: 99}
    _, rule = select_decision(state, MARKET_SIZING)
    assert rule != "calculator_succeeded"


def test_select_blocked_calculator_picks_a_task_for_a_missing_input() -> None:
    state = blocked([RATE, PRICE], dynamic_decompositions={TAM: [POP, RATE, PRICE]})
    d, rule = select_decision(state, MARKET_SIZING)
    assert rule == "calculator_blocked"
    assert d == {"action": "search", "field": RATE,
                 "query": "Germany subscription budgeting app adoption rate",
                 "reason": d["reason"]}
    assert "blocked on market.adoption_rate" in d["reason"]


def test_select_finishes_when_nothing_is_missing_and_no_task_is_open() -> None:
    d, rule = select_decision(ready(values=INPUTS), MARKET_SIZING)
    assert (d["action"], rule) == ("finish", "nothing_missing")
    assert d["reason"] == "every input has a value and no task is open"


def test_select_follows_an_open_acquisition_task() -> None:
    state = ready(values={POP: 1000}, dynamic_decompositions={TAM: [POP, RATE, PRICE]})
    d, rule = select_decision(state, MARKET_SIZING)
    assert (d["action"], d["field"], rule) == ("search", RATE, "acquisition_task")


def test_select_leaves_the_rest_to_the_llm() -> None:
    assert select_decision(ready(), MARKET_SIZING) == (None, None)


# -- decision_policy rules, in order ------------------------------------------------------

def names(records: list[dict[str, Any]]) -> list[str]:
    return [r["name"] for r in records]


def test_policy_redirects_a_derived_target_to_its_acquisition_task() -> None:
    final, rules, decomps = apply_policy(ready(values={POP: 5}), MARKET_SIZING,
                                         decision("search", TAM, "tam germany"), "llm")
    assert (final["action"], final["field"]) == ("search", RATE)
    assert names(rules) == ["derived_target"]
    assert rules[0]["reason"] == (f"{TAM} is derived from {POP}, {RATE}, {PRICE}; "
                                  f"acquiring {RATE} first")
    assert decomps == {TAM: [POP, RATE, PRICE]}


def test_policy_reflects_on_a_derived_target_with_nothing_acquirable() -> None:
    state = ready(values={POP: 5, RATE: 0.1}, answers=answered(PRICE, 3))
    final, rules, _ = apply_policy(state, MARKET_SIZING, decision("ask_user", TAM), "llm")
    assert final == {"action": "reflect", "field": TAM, "query": None,
                     "reason": f"no input of {TAM} can still be acquired"}
    assert names(rules) == ["derived_target"]


def test_policy_searches_a_web_field_before_asking() -> None:
    final, rules, _ = apply_policy(ready(), MARKET_SIZING, decision("ask_user", POP), "llm")
    assert final == {"action": "search", "field": POP, "query": "Germany population 2024",
                     "reason": f"search for {POP} before asking"}
    assert names(rules) == ["web_search_first"]


def with_queries(field: str, *queries: str) -> Profile:
    """MARKET_SIZING with ``field``'s query templates replaced by ``queries``."""
    fields = tuple(dataclasses.replace(f, queries=queries) if f.name == field else f
                   for f in MARKET_SIZING.fields)
    return dataclasses.replace(MARKET_SIZING, fields=fields)


def test_policy_lets_an_ask_stand_when_a_web_field_has_no_query_to_search() -> None:
    profile = with_queries(POP)
    final, rules, _ = apply_policy(ready(), profile, decision("ask_user", POP), "llm")
    assert (final["action"], final["field"], rules) == ("ask_user", POP, [])


def test_policy_asks_once_the_search_cap_is_reached() -> None:
    state = ready(searches=searched(RATE, "a", "b"))
    final, rules, _ = apply_policy(state, MARKET_SIZING,
                                   decision("search", RATE, "a brand new query"), "llm")
    assert final == {"action": "ask_user", "field": RATE, "query": None,
                     "reason": "searching did not find it"}
    assert names(rules) == ["search_cap"]
    assert "searched 2 times" in rules[0]["reason"]


def test_policy_asks_instead_of_repeating_a_query() -> None:
    state = ready(searches=searched(POP, "Germany population 2024"))
    final, rules, _ = apply_policy(state, MARKET_SIZING,
                                   decision("search", POP, "germany  POPULATION, 2024!"), "llm")
    assert final == {"action": "ask_user", "field": POP, "query": None,
                     "reason": "the query was already run"}
    assert names(rules) == ["duplicate_query"]


def test_policy_fills_a_missing_query() -> None:
    final, rules, _ = apply_policy(ready(), MARKET_SIZING, decision("search", POP), "llm")
    assert final["query"] == "Germany population 2024" and names(rules) == ["fill_query"]


def test_policy_finishes_at_the_ask_cap_then_calculates() -> None:
    state = ready(values={POP: 5, RATE: 0.1}, answers=answered(PRICE, 3))
    final, rules, _ = apply_policy(state, MARKET_SIZING, decision("ask_user", PRICE), "llm")
    assert names(rules) == ["ask_cap", "finish_needs_calculation"]
    assert rules[0]["after"]["action"] == "finish"
    assert final["action"] == "calculate"


def test_policy_turns_finish_into_calculate_before_the_calculator_succeeded() -> None:
    final, rules, _ = apply_policy(ready(values=INPUTS), MARKET_SIZING, decision("finish"),
                                   "deterministic")
    assert final == {"action": "calculate", "field": TAM, "query": None,
                     "reason": f"calculate {TAM} before finishing"}
    assert names(rules) == ["finish_needs_calculation"]
    assert rules[0]["reason"] == f"{TAM} has not been calculated from the current inputs"


def test_policy_turns_finish_into_reflect_while_the_calculator_is_blocked() -> None:
    final, rules, _ = apply_policy(blocked([RATE, PRICE]), MARKET_SIZING, decision("finish"),
                                   "llm")
    assert final == {"action": "reflect", "field": TAM, "query": None,
                     "reason": "the calculator is blocked"}
    assert names(rules) == ["finish_needs_calculation"]
    assert rules[0]["reason"] == f"the calculator is still blocked on {RATE}, {PRICE}"


def test_policy_keeps_finish_after_success_or_at_the_calculator_cap() -> None:
    for state in (succeeded(), blocked([PRICE], runs=3)):
        final, rules, _ = apply_policy(state, MARKET_SIZING, decision("finish"), "llm")
        assert final["action"] == "finish" and rules == []


def test_policy_passes_llm_errors_through_untouched() -> None:
    raw = decision("finish", reason="the model failed: boom")
    final, rules, _ = apply_policy(ready(), MARKET_SIZING, raw, "llm_error")
    assert final is raw and rules == []
    # the same decision from the model itself would have been rewritten
    assert apply_policy(ready(), MARKET_SIZING, raw, "llm")[0]["action"] == "calculate"


async def test_decision_policy_node_records_raw_rules_and_final() -> None:
    state = ready(decision=decision("ask_user", POP, reason="ask"), decision_origin="llm",
                  decided_by="decide")
    update = await nodes.decision_policy(state)
    [record] = update["decisions"]
    assert record["iteration"] == 3 and record["origin"] == "llm"
    assert record["raw"] == {"action": "ask_user", "field": POP, "query": None, "reason": "ask"}
    assert record["final"] == {"action": "search", "field": POP,
                               "query": "Germany population 2024"}
    assert record["rules"][0]["before"] == {"action": "ask_user", "field": POP, "query": None}
    assert update["decision"]["action"] == "search"


# -- routers: read state only --------------------------------------------------------------

ROUTER_CASES = [
    (routers.route_after_tick, {"decision": decision("finish")}, "finish"),
    (routers.route_after_tick, {"decision": None}, "bootstrap_gate"),
    (routers.route_after_bootstrap, {"decision": decision("ask_user", "core.region")},
     "ask_user"),
    (routers.route_after_bootstrap, {"decision": None}, "prepare"),
    (routers.route_after_select, {"decision": decision("finish"),
                                  "decision_origin": "deterministic"}, "decision_policy"),
    (routers.route_after_select, {"decision": None, "decision_origin": None}, "decide"),
    (routers.route_after_policy, {"decision": decision("calculate", TAM)}, "calculate"),
    (routers.route_after_policy, {"decision": decision("reflect", TAM)}, "reflect"),
    (routers.route_after_policy, {"decision": decision("search", POP, "q")}, "search"),
    (routers.route_after_search, {"last_observation": {"field": POP, "value": 1}}, "observe"),
    (routers.route_after_search, {"last_observation": None}, "tick"),
]


@pytest.mark.parametrize(("router", "overrides", "expected"), ROUTER_CASES)
async def test_routers_route_without_touching_state(router: Any, overrides: dict[str, Any],
                                                    expected: str) -> None:
    state = ready(**overrides)
    before = copy.deepcopy(state)
    assert await router(state) == expected
    assert state == before


def test_every_node_and_router_is_async() -> None:
    from planner.llm import ScriptedLLM
    from planner.search import LocalCorpusSearch

    functions = [
        nodes.tick, nodes.bootstrap_gate, nodes.prepare, nodes.select, nodes.decision_policy,
        nodes.make_decide(ScriptedLLM()), actions.make_search(LocalCorpusSearch()),
        actions.observe, actions.calculate, actions.ask_user, actions.observe_user,
        actions.reflect, actions.finish,
        *(getattr(routers, n) for n in dir(routers) if n.startswith("route_")),
    ]
    assert all(inspect.iscoroutinefunction(f) for f in functions)


def test_policy_fills_a_missing_query_with_the_template_of_the_next_attempt() -> None:
    state = ready(searches=searched(POP, "Germany population 2024"))
    final, rules, _ = apply_policy(state, MARKET_SIZING, decision("search", POP, ""), "llm")
    assert final["query"] == "total population of Germany residents"
    assert rules[0] == {"name": "fill_query",
                        "reason": "the search had no query; using the field's query template",
                        "before": {"action": "search", "field": POP, "query": ""},
                        "after": {"action": "search", "field": POP,
                                  "query": "total population of Germany residents"}}


def test_policy_reuses_the_last_template_once_the_templates_are_used_up() -> None:
    state = ready(searches=searched(POP, "Germany population 2024"))
    final, rules, _ = apply_policy(state, with_queries(POP, "{region} population 2024"),
                                   decision("search", POP, None), "llm")
    assert (final["action"], final["field"]) == ("ask_user", POP)
    assert names(rules) == ["fill_query", "duplicate_query"]


def test_policy_fills_a_query_from_the_label_when_the_field_has_no_template() -> None:
    final, rules, _ = apply_policy(ready(), with_queries(POP), decision("search", POP, " "),
                                   "llm")
    assert (final["action"], final["query"]) == ("search", "Population Germany")
    assert names(rules) == ["fill_query"]


def test_policy_finishes_at_the_ask_cap_naming_the_field_when_the_calculator_is_spent() -> None:
    state = blocked([PRICE], runs=3, answers=answered(PRICE, 3))
    final, rules, _ = apply_policy(state, MARKET_SIZING, decision("ask_user", PRICE), "llm")
    assert final == {"action": "finish", "field": None, "query": None,
                     "reason": f"{PRICE} could not be acquired"}
    assert names(rules) == ["ask_cap"]
