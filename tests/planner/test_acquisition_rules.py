"""The seeds' rules, each shown on the running graph (InMemorySaver, Command resumes)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from planner.acquisition import nodes
from planner.llm import ScriptedLLM
from planner.search import LocalCorpusSearch
from tests.support.acquisition import (
    compile_graph,
    drive,
    scripted_with,
    sequence,
    start,
)

PACKAGE = Path(__file__).resolve().parents[2] / "planner" / "acquisition"
POP, RATE, PRICE, TAM = ("market.population", "market.adoption_rate", "market.price",
                         "market.tam")
FINISH = {"action": "finish", "field": None, "query": None, "reason": "done, I think"}


async def test_only_tick_writes_iterations() -> None:
    trace = await drive(compile_graph(), start(), ["Germany", "EUR", "47.88"])
    writers = {node for node, update in trace.updates if update and "iterations" in update}
    assert writers == {"tick"}
    ticks = [u["iterations"] for u in trace.update_of("tick") if "iterations" in u]
    assert ticks == list(range(1, 8))


async def test_tick_resets_decision_origin() -> None:
    trace = await drive(compile_graph(), start(), ["Germany", "EUR", "47.88"])
    origins = [u["decision_origin"] for u in trace.update_of("tick")]
    assert origins == [None] * 7


async def test_tick_finishes_after_max_iters() -> None:
    trace = await drive(compile_graph(), start(region="DE", currency="EUR", max_iters=2))
    assert trace.nodes.count("tick") == 3 and trace.nodes[-2:] == ["tick", "finish"]
    assert trace.values["iterations"] == 2
    last = trace.values["decisions"][-1]
    assert last["decided_by"] == "tick" and "max_iters (2)" in last["raw"]["reason"]
    assert trace.values["result"]["status"] == "incomplete"
    assert trace.values["result"]["iterations"] == 2


async def test_tick_finishes_an_aborted_run_without_counting() -> None:
    state = {**start(), "status": "aborted", "abort_reason": "operator stopped it"}
    trace = await drive(compile_graph(), state)
    assert trace.nodes == ["tick", "finish"]
    assert trace.values["iterations"] == 0
    assert trace.values["result"]["status"] == "aborted"
    assert "operator stopped it" in trace.values["result"]["reason"]


async def test_bootstrap_asks_region_then_currency_before_any_preparation() -> None:
    trace = await drive(compile_graph(), start(), ["Brazil", "BRL"])
    assert trace.pending  # waiting for the price
    assert [q["field"] for q in trace.questions[:2]] == ["core.region", "core.currency"]
    first_prepare = trace.nodes.index("prepare")
    assert trace.nodes[:first_prepare].count("observe_user") == 2
    assert "search" not in trace.nodes[:first_prepare]


async def test_bootstrap_asks_only_what_is_missing() -> None:
    trace = await drive(compile_graph(), start(currency="EUR"), ["France"])
    assert [q["field"] for q in trace.questions][:1] == ["core.region"]
    assert "core.currency" not in [q["field"] for q in trace.questions]


async def test_three_invalid_regions_are_asked_with_reasons_then_passed_on() -> None:
    # Seed 000's guard table: "Region missing, retries < 3 -> ask_user"; once the retries
    # are used up, "none of the above -> prepare" (the run goes on, it is not aborted).
    trace = await drive(compile_graph(), start(), ["Atlantis", "", "Narnia", "EUR"])
    regions = [q for q in trace.questions if q["field"] == "core.region"]
    assert [q["attempt"] for q in regions] == [1, 2, 3]
    assert regions[0]["reason"] is None
    assert "unknown region 'Atlantis'" in regions[1]["reason"]
    assert "such as Portugal or PT" in regions[1]["reason"]  # the way out
    assert "empty" in regions[2]["reason"]
    assert trace.questions[3]["field"] == "core.currency"
    assert trace.values["status"] == "running" and trace.values["abort_reason"] is None
    assert "prepare" in trace.nodes
    assert trace.values["schema"]["core.region"]["status"] == "exhausted"
    assert trace.values["values"]["core.currency"] == "EUR"


async def test_invalid_currency_is_reasked_with_the_reason() -> None:
    trace = await drive(compile_graph(), start(region="Germany"), ["EURO", "eur"])
    first, second = trace.questions[:2]
    assert first["field"] == second["field"] == "core.currency"
    assert second["attempt"] == 2
    assert "'EURO' is not an ISO 4217 currency code" in second["reason"]
    assert trace.values["values"]["core.currency"] == "EUR"


async def test_invalid_numbers_are_reasked_with_the_reason_counting_attempts() -> None:
    trace = await drive(compile_graph(), start(region="DE", currency="EUR"),
                        ["abc", "-5", "12.5"])
    price = [q for q in trace.questions if q["field"] == PRICE]
    assert [q["attempt"] for q in price] == [1, 2, 3]
    assert "'abc' is not a number" in price[1]["reason"]
    assert "-5 is out of range" in price[2]["reason"]
    answers = [a for a in trace.values["answers"] if a["field"] == PRICE]
    assert [a["valid"] for a in answers] == [False, False, True]
    assert trace.values["values"][PRICE] == 12.5
    assert trace.values["result"]["status"] == "complete"


def test_only_ask_user_calls_interrupt() -> None:
    callers = set()
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "interrupt":
                    callers.add(f"{path.stem}.{fn.name}")
    assert callers == {"actions.ask_user"}


async def test_llm_failure_finishes_with_origin_llm_error_untouched() -> None:
    llm = ScriptedLLM(fail={"acquisition.decide"})
    trace = await drive(compile_graph(llm=llm), start(region="DE", currency="EUR"))
    assert trace.nodes == ["tick", "bootstrap_gate", "prepare", "select", "decide",
                           "decision_policy", "finish"]
    [record] = trace.values["decisions"]
    assert record["origin"] == "llm_error" and record["rules"] == []
    assert record["final"]["action"] == "finish"  # not rewritten into calculate
    assert "scripted failure" in record["raw"]["reason"]
    assert trace.values["result"]["status"] == "incomplete"


@pytest.mark.parametrize("llm", [
    ScriptedLLM(malformed={"acquisition.decide"}),
    scripted_with({"action": "search", "field": "market.gdp", "query": "gdp"}),
    scripted_with({"action": "ask_user", "field": None}),
    scripted_with({"action": "teleport", "field": POP}),
])
async def test_unusable_model_answers_are_llm_errors(llm: ScriptedLLM) -> None:
    trace = await drive(compile_graph(llm=llm), start(region="DE", currency="EUR"))
    assert trace.values["decisions"][-1]["origin"] == "llm_error"
    assert trace.nodes[-1] == "finish"


async def test_blocked_calculator_drives_acquisition_of_its_missing_inputs() -> None:
    llm = scripted_with(FINISH)  # a model that wants to stop at once
    trace = await drive(compile_graph(llm=llm), start(region="DE", currency="EUR"), ["40"])

    by = [r["decided_by"] for r in trace.values["decisions"]]
    assert by == ["decide", "select:calculator_blocked", "select:calculator_blocked",
                  "select:calculator_blocked", "select:nothing_missing",
                  "select:calculator_succeeded"]
    first = trace.values["decisions"][0]
    assert first["rules"][0]["name"] == "finish_needs_calculation"
    assert [r["final"]["field"] for r in trace.values["decisions"][1:4]] == [POP, RATE, PRICE]
    assert trace.values["dynamic_decompositions"] == {TAM: [POP, RATE, PRICE]}
    assert trace.nodes.count("calculate") == 2
    assert trace.values["result"]["tam"] == pytest.approx(84_500_000 * 0.18 * 40)


async def test_blocked_calculator_with_nothing_acquirable_reflects_and_aborts() -> None:
    llm = scripted_with(FINISH)
    trace = await drive(compile_graph(llm=llm), start(region="DE", currency="EUR"),
                        ["abc", "def", "ghi"])
    assert "reflect" in trace.nodes
    last_policy = trace.values["decisions"][-2]
    assert last_policy["final"]["action"] == "reflect"
    assert [r["name"] for r in last_policy["rules"]] == ["finish_needs_calculation"]
    [note] = [n for n in trace.values["notes"] if n["kind"] == "reflection"]
    assert note["missing"] == [PRICE] and note["acquirable"] == []
    assert trace.values["result"]["status"] == "aborted"
    assert trace.values["result"]["missing"] == [PRICE]


async def test_derived_target_is_redirected_then_tasks_run_deterministically() -> None:
    llm = scripted_with({"action": "search", "field": TAM, "query": "budgeting app TAM DE"})
    trace = await drive(compile_graph(llm=llm), start(region="DE", currency="EUR"), ["40"])

    first = trace.values["decisions"][0]
    assert first["raw"]["field"] == TAM
    assert [r["name"] for r in first["rules"]] == ["derived_target"]
    assert first["final"] == {"action": "search", "field": POP, "query": "Germany population 2024"}
    assert [r["decided_by"] for r in trace.values["decisions"][1:3]] == [
        "select:acquisition_task"] * 2
    assert len(llm.calls) == 1
    assert trace.values["result"]["status"] == "complete"


async def test_duplicate_query_is_rewritten_to_ask_user() -> None:
    query = {"action": "search", "field": POP, "query": "Germany population 2024"}
    search = LocalCorpusSearch(empty_fields={POP})
    trace = await drive(compile_graph(llm=scripted_with(query), search=search),
                        start(region="DE", currency="EUR"))
    second = trace.values["decisions"][1]
    assert [r["name"] for r in second["rules"]] == ["duplicate_query"]
    assert second["final"] == {"action": "ask_user", "field": POP, "query": None}
    assert trace.pending and trace.questions[-1]["field"] == POP
    assert len(search.calls) == 1


async def test_search_cap_is_rewritten_to_ask_user() -> None:
    llm = scripted_with(sequence(
        {"action": "search", "field": RATE, "query": "Brazil budgeting app adoption rate"},
        {"action": "search", "field": RATE, "query": "Brazil finance apps share"},
        {"action": "search", "field": RATE, "query": "Brazil app users adoption"},
    ))
    trace = await drive(compile_graph(llm=llm), start(region="BR", currency="BRL"))
    third = trace.values["decisions"][2]
    assert [r["name"] for r in third["rules"]] == ["search_cap"]
    assert third["final"]["action"] == "ask_user"
    assert trace.questions[-1]["field"] == RATE


async def test_ask_cap_ends_asking() -> None:
    llm = scripted_with({"action": "ask_user", "field": PRICE})
    trace = await drive(compile_graph(llm=llm), start(region="DE", currency="EUR"),
                        ["x", "y", "z"])
    capped = trace.values["decisions"][3]
    assert [r["name"] for r in capped["rules"]] == ["ask_cap", "finish_needs_calculation"]
    assert capped["final"]["action"] == "calculate"
    assert len([q for q in trace.questions if q["field"] == PRICE]) == 3
    assert not trace.pending


async def test_prepare_composes_schema_and_decompositions_without_recipes() -> None:
    calc = {"status": "blocked", "target": TAM, "inputs": {}, "missing": [POP, RATE, PRICE]}
    state = {**start(region="DE", currency="EUR"), "calculation": calc, "calc_runs": 1}
    update = await nodes.prepare(state)
    assert set(update) == {"schema", "dynamic_decompositions"}
    assert update["dynamic_decompositions"] == {TAM: [POP, RATE, PRICE]}
    assert update["schema"][POP]["status"] == "missing"
    assert update["schema"]["core.region"]["status"] == "filled"
    assert update["schema"][TAM] == {"label": "Total addressable market", "strategy": "derived",
                                     "kind": "number", "status": "derived", "searches": 0,
                                     "asks": 0, "components": [POP, RATE, PRICE]}
