"""The acquisition graph end to end: compiled with InMemorySaver, resumed with Command."""

from __future__ import annotations

import dataclasses
import json

import pytest
from langgraph.graph import StateGraph

from planner.acquisition.graph import NODES, build_graph
from planner.acquisition.state import AcquisitionState
from planner.llm import ScriptedLLM
from planner.registry import get_graph
from planner.search import LocalCorpusSearch
from tests.support.acquisition import compile_graph, drive, start

PLAN = ["tick", "bootstrap_gate", "prepare", "select"]
ASK = ["ask_user", "observe_user"]

SCRIPTED_RUN = [
    "tick", "bootstrap_gate", *ASK,                           # region
    "tick", "bootstrap_gate", *ASK,                           # currency
    *PLAN, "decide", "decision_policy", "search", "observe",  # population
    *PLAN, "decide", "decision_policy", "search", "observe",  # adoption rate
    *PLAN, "decide", "decision_policy", *ASK,                 # price
    *PLAN, "decision_policy", "calculate",                    # finish -> calculate
    *PLAN, "decision_policy", "finish",                       # finish
]


async def test_scripted_run_visits_nodes_in_order_and_computes_tam() -> None:
    llm = ScriptedLLM()
    trace = await drive(compile_graph(llm=llm), start(), ["Germany", "eur", "47.88"])

    assert trace.nodes == SCRIPTED_RUN
    result = trace.values["result"]
    assert result["status"] == "complete"
    assert result["tam"] == pytest.approx(84_500_000 * 0.18 * 47.88)
    assert result["values"]["market.price"] == 47.88
    assert result["currency"] == "EUR" and result["region"] == "Germany"
    assert result["iterations"] == 7
    assert result["sources"]["market.population"].startswith("local-corpus://")
    # one model call per decide step: nothing before an interrupt was re-run on resume
    assert len(llm.calls) == trace.nodes.count("decide") == 3


async def test_scripted_run_records_each_decisions_provenance() -> None:
    trace = await drive(compile_graph(), start(), ["Germany", "EUR", 47.88])
    records = trace.values["decisions"]

    summary = [(r["iteration"], r["origin"], r["decided_by"], r["final"]["action"],
                r["final"]["field"]) for r in records]
    assert summary == [
        (1, "deterministic", "bootstrap_gate", "ask_user", "core.region"),
        (2, "deterministic", "bootstrap_gate", "ask_user", "core.currency"),
        (3, "llm", "decide", "search", "market.population"),
        (4, "llm", "decide", "search", "market.adoption_rate"),
        (5, "llm", "decide", "ask_user", "market.price"),
        (6, "deterministic", "select:nothing_missing", "calculate", "market.tam"),
        (7, "deterministic", "select:calculator_succeeded", "finish", "market.tam"),
    ]
    assert records[2]["raw"]["query"] == "Germany population 2024"
    assert records[3]["raw"]["query"] == "Germany subscription budgeting app adoption rate"
    assert [r["rules"] for r in records[:5]] == [[]] * 5
    rewrite = records[5]
    assert rewrite["raw"]["action"] == "finish"
    assert rewrite["rules"] == [{
        "name": "finish_needs_calculation",
        "reason": "market.tam has not been calculated from the current inputs",
        "before": {"action": "finish", "field": None, "query": None},
        "after": {"action": "calculate", "field": "market.tam", "query": None},
    }]


async def test_resume_by_interrupt_id_works_like_a_plain_answer() -> None:
    trace = await drive(compile_graph(), start(), ["France", "EUR", "30"], by_id=True)
    assert trace.values["result"]["status"] == "complete"
    assert trace.values["result"]["tam"] == pytest.approx(68_400_000 * 0.15 * 30)


async def test_interrupt_payloads_describe_the_forms() -> None:
    trace = await drive(compile_graph(), start(), ["Japan", "JPY", "6000"])
    region, currency, price = trace.questions

    assert region["field"] == "core.region" and region["kind"] == "region"
    assert "Japan" in region["choices"] and region["attempt"] == 1
    assert region["reason"] is None and region["prompt"].endswith("?")
    assert currency["kind"] == "currency" and {"EUR", "USD", "JPY"} <= set(currency["choices"])
    assert price == {
        "field": "market.price", "label": "Yearly price",
        "prompt": ("What yearly price per user of subscription budgeting app (in JPY) "
                   "should we assume?"), "kind": "number",
        "choices": [], "constraints": {"min": 0, "max": 1_000_000}, "unit": "JPY per year",
        "attempt": 1, "max_attempts": 3, "reason": None,
    }
    assert trace.interrupt_nodes == ["ask_user"] * 3


async def test_final_state_is_plain_json() -> None:
    trace = await drive(compile_graph(), start(), ["Germany", "EUR", "47.88"])
    values = {k: v for k, v in trace.values.items()}
    assert json.loads(json.dumps(values)) == values
    assert set(values) == set(AcquisitionState.__annotations__)
    assert "recipes" not in values


async def test_prefilled_region_and_currency_skip_bootstrap() -> None:
    trace = await drive(compile_graph(), start(region="us", currency="usd"), [120])
    assert [q["field"] for q in trace.questions] == ["market.price"]
    assert trace.nodes[:4] == PLAN
    assert trace.values["result"]["tam"] == pytest.approx(335_000_000 * 0.28 * 120)


async def test_adoption_rate_is_asked_after_searches_find_nothing() -> None:
    search = LocalCorpusSearch()
    trace = await drive(compile_graph(search=search), start(region="India", currency="INR"),
                        ["9%", "1200"])

    adoption = [s for s in trace.values["searches"] if s["field"] == "market.adoption_rate"]
    assert [s["hits"] for s in adoption] == [0, 0]
    assert len({s["query"] for s in adoption}) == 2
    assert [q["field"] for q in trace.questions] == ["market.adoption_rate", "market.price"]
    assert trace.values["values"]["market.adoption_rate"] == pytest.approx(0.09)
    assert trace.values["result"]["status"] == "complete"
    # population was observed; the two fruitless searches went straight back to tick
    after_search = [trace.nodes[i + 1] for i, n in enumerate(trace.nodes) if n == "search"]
    assert after_search == ["observe", "tick", "tick"]


async def test_search_backend_failure_goes_back_to_tick_and_is_logged() -> None:
    search = LocalCorpusSearch(fail_fields={"market.population"})
    trace = await drive(compile_graph(search=search), start(region="DE", currency="EUR"),
                        ["84000000", "50"])

    first = trace.values["searches"][0]
    assert first["field"] == "market.population" and "unavailable" in first["error"]
    search_at = trace.nodes.index("search")
    assert trace.nodes[search_at + 1] == "tick"
    assert trace.values["values"]["market.population"] == 84_000_000
    assert trace.values["sources"]["market.population"] == "user"


async def test_topology_is_seed_001_hybrid() -> None:
    drawn = compile_graph().get_graph()
    edges = {(e.source, e.target) for e in drawn.edges}
    assert edges == {
        ("__start__", "tick"), ("tick", "finish"), ("tick", "bootstrap_gate"),
        ("bootstrap_gate", "ask_user"), ("bootstrap_gate", "prepare"),
        ("prepare", "select"), ("select", "decision_policy"), ("select", "decide"),
        ("decide", "decision_policy"),
        *{("decision_policy", a) for a in ("search", "ask_user", "calculate", "reflect",
                                            "finish")},
        ("search", "observe"), ("search", "tick"), ("observe", "tick"),
        ("calculate", "tick"), ("observe_user", "tick"), ("reflect", "tick"),
        ("ask_user", "observe_user"), ("finish", "__end__"),
    }
    assert set(drawn.nodes) - {"__start__", "__end__"} == set(NODES)


def test_registry_entry_builds_an_uncompiled_graph_with_a_version() -> None:
    spec = get_graph("acquisition")
    builder = spec.build(llm=ScriptedLLM(), search=LocalCorpusSearch())
    assert isinstance(builder, StateGraph)
    assert spec.version == 1
    assert spec.thread_id("conv-7") == "conv-7:planner"
    assert dataclasses.replace(spec, version=2).thread_id("conv-7") == "conv-7:planner:v2"
    assert [f.name for f in spec.input_fields] == [
        "goal", "profile", "region", "currency", "max_iters"]
    assert spec.make_input({})["graph_version"] == spec.version


async def test_a_new_process_resumes_from_the_sqlite_checkpoint() -> None:
    """The dashboard's embedded saver: stop at an interrupt, rebuild the graph, resume."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.types import Command

    config = {"configurable": {"thread_id": "conv-1:planner"}}
    async with AsyncSqliteSaver.from_conn_string(":memory:") as saver:
        first = build_graph(llm=ScriptedLLM(), search=LocalCorpusSearch()).compile(
            checkpointer=saver)
        await first.ainvoke(start(region="Germany"), config, durability="sync")
        [task] = [t for t in (await first.aget_state(config)).tasks if t.interrupts]
        assert task.name == "ask_user" and task.interrupts[0].value["field"] == "core.currency"

        llm = ScriptedLLM()
        second = build_graph(llm=llm, search=LocalCorpusSearch()).compile(checkpointer=saver)
        await second.ainvoke(Command(resume="EUR"), config, durability="sync")
        await second.ainvoke(Command(resume="50"), config, durability="sync")
        state = await second.aget_state(config)

    assert not state.next
    assert state.values["result"]["tam"] == pytest.approx(84_500_000 * 0.18 * 50)
    assert len(llm.calls) == 3
