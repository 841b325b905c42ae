"""Questions and the scripted model follow the goal the user typed."""

from __future__ import annotations

from planner.acquisition.validation import check_region
from planner.decomposition import make_input as decomposition_input
from planner.decomposition.scripted import abstract_plan
from tests.support.acquisition import compile_graph, drive, start
from tests.support.decomposition import Run


async def test_a_porto_goal_offers_portugal_preselected_and_searches_its_subject() -> None:
    trace = await drive(compile_graph(), start(goal="e-bike rentals in Porto"),
                        ["Portugal", "EUR", "120"])
    region, currency = trace.questions[0], trace.questions[1]
    assert "Portugal" in region["choices"] and region["suggested"] == "Portugal"
    assert currency["suggested"] == "EUR"
    adoption = next(q for q in trace.questions if q["field"] == "market.adoption_rate")
    assert adoption["prompt"].startswith(
        "What share of people in Portugal would use e-bike rentals")
    queries = [u["searches"][-1]["query"] for n, u in trace.updates if n == "search"]
    assert "Portugal e-bike rentals adoption rate" in queries
    assert not any("budgeting" in q for q in queries)


async def test_a_goal_naming_japan_preselects_japan_and_yen() -> None:
    trace = await drive(compile_graph(), start(goal="Size the market for robot vacuums in Japan"),
                        [])
    assert trace.questions[0]["suggested"] == "Japan"


def test_any_country_is_a_region_and_aliases_still_work() -> None:
    assert check_region("portugal") == ("Portugal", None)
    assert check_region("PT") == ("Portugal", None)
    assert check_region("uk") == ("United Kingdom", None)
    assert check_region("Atlantis")[0] is None


async def test_the_scripted_decomposition_writes_about_the_goal() -> None:
    goal = "A launch plan for e-bike rentals in Porto"
    plan = abstract_plan({"task_id": "root", "goal": goal, "settings": {}})
    assert all(goal in t["goal"] for t in plan if t["id"] in ("1", "2", "3", "4"))
    sections = abstract_plan({"task_id": "3", "goal": plan[-2]["goal"],
                              "settings": {"breadth": 3}})
    assert all("e-bike rentals" in s["goal"] for s in sections)
    state = await Run().go(decomposition_input({"goal": goal}))
    assert "solar" not in state.values["synthesis"] and "grid" not in state.values["synthesis"]
    assert state.values["synthesis"].startswith(f"Synthesis for: {goal}")
