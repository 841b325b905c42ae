"""Seed 004's F02 rules on the running decomposition graph (scripted model, in-memory saver)."""

from __future__ import annotations

from typing import Any

from planner.decomposition.f02 import aaccept_decision, adone_decision, tone_of
from planner.decomposition.workers import Worker, default_workers
from planner.llm import ScriptedLLM
from planner.search import SearchHit
from tests.support.decomposition import Run, pack, plans_by_task, statuses, xml_plan


def _decisions(state: Any, action: str) -> list[dict[str, Any]]:
    return [d for d in state.values["decisions"] if d["action"] == action]


# --- synthesis_inputs ----------------------------------------------------------------------


async def test_done_decision_names_two_of_three_slots_and_the_synthesis_uses_only_those() -> None:
    llm = ScriptedLLM(overrides={"decomposition.plan": plans_by_task({"root": xml_plan(
        ("1", "Look up community solar", "search", "", True),
        ("2", "Write the introduction", "write", "1", True),
        ("3", "Write the recommendation", "write", "2", True),
    )})})
    state = await Run(llm=llm).start()
    done = _decisions(state, "done")[0]
    assert done["synthesis_inputs"] == {"part_2": {"from_sub_goal": "2", "slot": "text"},
                                        "part_3": {"from_sub_goal": "3", "slot": "text"}}
    assert state.values["tasks"]["1"]["status"] == "ok"  # finished, yet not named
    synthesis = state.values["synthesis"]
    assert "[2] Write the introduction" in synthesis and "[3] Write the recommendation" in synthesis
    assert "[1]" not in synthesis


async def test_a_reference_to_a_missing_slot_is_dropped_and_named() -> None:
    llm = ScriptedLLM(overrides={
        "decomposition.plan": plans_by_task({"root": xml_plan(
            ("1", "Write part one", "write", "", True), ("2", "Write part two", "write", "", True),
        )}),
        "decomposition.done": {"synthesis_inputs": {
            "a": {"from_sub_goal": "1", "slot": "text"},
            "b": {"from_sub_goal": "2", "slot": "figures"},
            "c": {"from_sub_goal": "9", "slot": "text"},
        }},
    })
    state = await Run(llm=llm).start()
    done = _decisions(state, "done")[0]
    assert done["dropped"] == ["b: task '2' has no slot 'figures'",
                               "c: task '9' has not finished ok"]
    assert "[1] Write part one" in state.values["synthesis"]
    assert "[2]" not in state.values["synthesis"]


async def test_without_a_usable_done_decision_every_finished_task_is_synthesised() -> None:
    llm = ScriptedLLM(fail={"decomposition.done"}, overrides={
        "decomposition.plan": plans_by_task({"root": xml_plan(
            ("1", "Look it up", "search", "", True), ("2", "Write it", "write", "", True),
        )})})
    state = await Run(llm=llm).start()
    assert state.values["synthesis_inputs"] is None
    assert "done-decision failed" in _decisions(state, "done")[0]["reasoning"]
    assert "[1] Look it up" not in state.values["synthesis"]  # texts, not goals, are listed
    assert "- [1]" in state.values["synthesis"] and "- [2]" in state.values["synthesis"]


# --- partial success -----------------------------------------------------------------------


async def test_a_non_essential_failed_task_is_accepted_and_the_run_is_done() -> None:
    state = await Run().start(inject_failure="optional_error")
    task = state.values["tasks"]["7"]
    assert (task["status"], task["accepted"], task["attempts"]) == ("err", True, 2)
    assert statuses(state)["4"] == "ok"  # its dependent ran without it
    assert statuses(state)["root"] == "ok"
    assert state.values["status"] == "done"
    assert state.values["result"]["accepted_failures"] == ["7"]
    accepted = [a for d in _decisions(state, "join") for a in d["accepted"]]
    assert accepted == [{"task": "7",
                         "reasoning": "the task was optional; the rest still answers"}]
    assert "[7]" not in state.values["synthesis"]


async def test_an_essential_failed_task_is_not_accepted_and_fails_the_run() -> None:
    state = await Run().start(inject_failure="worker_error", max_retries=0,
                              error_policy="continue")
    assert state.values["tasks"]["7"]["accepted"] is False
    assert statuses(state)["4"] == "blocked" and statuses(state)["root"] == "err"
    assert state.values["status"] == "failed"
    assert state.values["result"]["accepted_failures"] == []


# --- tone ----------------------------------------------------------------------------------


async def test_an_uncertain_result_is_redone_with_a_new_sub_goal() -> None:
    state = await Run().start(inject_failure="uncertain")
    task = state.values["tasks"]["7"]
    assert task["goal"] == "Estimate local demand from published figures"
    assert (task["status"], task["attempts"]) == ("ok", 2)
    assert task["errors"][0].startswith("its result is uncertain: I am not sure")
    joins = _decisions(state, "join")
    assert [d["uncertain"] for d in joins if d["uncertain"]] == [["7"]]
    assert [r["task"] for d in joins for r in d["retried"]] == ["7"]
    assert state.values["status"] == "done"


async def test_an_uncertain_result_without_retries_left_is_kept_and_recorded() -> None:
    state = await Run().start(inject_failure="uncertain", max_retries=0)
    task = state.values["tasks"]["7"]
    assert (task["status"], task["attempts"]) == ("ok", 1)
    assert task["result"]["text"].startswith("I am not sure")
    assert any(d["uncertain"] == ["7"] and not d["retried"] for d in _decisions(state, "join"))


async def test_a_search_with_no_hits_is_searched_again_more_broadly() -> None:
    class BroadOnly:
        async def asearch(self, query: str, *, field: str | None = None) -> list[SearchHit]:
            if "broader" not in query:
                return []
            return [SearchHit(title="Solar", snippet="shared arrays", source="doc-1")]

    state = await Run(search=BroadOnly()).start()
    task = state.values["tasks"]["1"]
    assert task["goal"].endswith("(broader search)") and task["status"] == "ok"
    assert task["errors"][0].endswith("found nothing")
    assert task["result"]["text"] == "Solar: shared arrays"


# --- preconditions at planning time --------------------------------------------------------


async def test_a_task_with_an_unmet_precondition_is_never_dispatched() -> None:
    ran: list[str] = []

    async def route(ctx: Any) -> dict[str, Any]:
        ran.append(ctx.task["id"])
        return {"label": "left", "text": "left"}

    base = default_workers()["llm_enum_route"]
    workers = {**default_workers(),
               "llm_enum_route": Worker(base.name, base.description, route, base.preconditions)}
    llm = ScriptedLLM(overrides={"decomposition.plan": plans_by_task({"root": pack({
        "good": {"task_id": "llm_enum_route", "input": {"labels": ["left", "right"]}},
        "bad": {"task_id": "llm_enum_route", "input": {"goal": "route with no labels"}},
    })})})
    state = await Run(llm=llm, workers=workers).start(error_policy="continue")
    assert ran == ["good"]
    bad = state.values["tasks"]["bad"]
    assert (bad["status"], bad["error_kind"], bad["attempts"]) == ("err", "precondition", 0)
    first = _decisions(state, "continue")[0]
    assert first["dispatched"] == ["good"]
    assert first["unmet"] == [{
        "task": "bad", "accepted": False, "reasoning": "the run needs this task's result",
        "error": "precondition of worker 'llm_enum_route' not met: input has a non-empty "
                 "'labels' list"}]


def test_a_results_own_tone_wins_over_the_hedging_in_its_text() -> None:
    assert tone_of({"tone": "uncertain", "text": "Berlin is the capital."}) == "uncertain"
    assert tone_of({"tone": "confident", "text": "I am not sure, but Berlin."}) == "confident"
    assert tone_of({"tone": "shaky", "text": "unclear"}) == "uncertain"
    assert tone_of({"text": None}) == "confident"


async def test_a_failed_acceptance_call_refuses_the_failure_and_says_why() -> None:
    task = {"id": "t1", "goal": "find the capital", "error": "boom", "error_kind": "worker"}
    llm = ScriptedLLM(fail={"decomposition.accept"})
    decision = await aaccept_decision(llm=llm, task=task, run_goal="a report")
    assert decision.accept is False
    assert decision.reasoning == ("acceptance decision failed: scripted failure for "
                                  "'decomposition.accept'")
    assert llm.calls == [("decomposition.accept", {
        "task_id": "t1", "goal": "find the capital", "error": "boom", "error_kind": "worker",
        "run_goal": "a report"})]


async def test_a_failed_done_decision_falls_back_to_every_finished_task() -> None:
    llm = ScriptedLLM(fail={"decomposition.done"})
    done = await adone_decision(llm=llm, tasks={}, run_goal="a report")
    assert done == {"synthesis_inputs": None, "dropped": [],
                    "reasoning": "done-decision failed: scripted failure for "
                                 "'decomposition.done'; using every finished task"}
    assert llm.calls == [("decomposition.done", {"run_goal": "a report", "outputs": []})]


# --- the rules' small parts, one at a time (mutation survivors named in docs/seed-rules.md) --


def _tasks(*records: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from planner.decomposition.tasks import new_task

    tasks = {}
    for record in records:
        task = new_task(task_id=record["id"], goal=record.get("goal", f"goal {record['id']}"),
                        task_type=record.get("task_type", "write"), atomic=record.get(
                            "atomic", True), parent=record.get("parent", "root"), depth=1,
                        worker=record.get("worker"), deps=record.get("deps", ()))
        task.update({k: v for k, v in record.items() if k in ("status", "result")})
        tasks[task["id"]] = task
    return tasks


def _problem(task: dict[str, Any], tasks: dict[str, dict[str, Any]]) -> Any:
    from planner.decomposition.f02 import dispatch_problem

    return dispatch_problem(task, registry=default_workers(), tasks=tasks, run_goal="a report",
                            llm=ScriptedLLM(), search=None)


def test_a_task_without_a_worker_is_dispatched_to_its_task_type() -> None:
    tasks = _tasks({"id": "1", "task_type": "write", "worker": None},
                   {"id": "2", "task_type": "search", "worker": "write"})
    assert _problem(tasks["1"], tasks) is None  # 'write' is registered and its goal is set
    assert _problem(tasks["2"], tasks) is None  # its worker wins over its task type


def test_an_unknown_worker_is_named_with_the_registered_ones() -> None:
    tasks = _tasks({"id": "7", "task_type": "write", "worker": "translate"})
    problem = _problem(tasks["7"], tasks)
    assert problem.kind == "unknown_worker"
    assert str(problem) == (
        "unknown worker 'translate' for task 7; registered workers: "
        + ", ".join(sorted(default_workers())))


def test_the_done_decision_is_shown_the_finished_tasks_only_with_their_slots() -> None:
    from planner.decomposition.f02 import finished_outputs

    tasks = _tasks(
        {"id": "root", "parent": None, "status": "ok", "result": {"text": "all"}},
        {"id": "1", "goal": "Look it up", "task_type": "search", "worker": "search",
         "status": "ok", "result": {"text": "hits", "sources": []}},
        {"id": "2", "goal": "Plan the parts", "atomic": False, "status": "ok",
         "result": {"text": "parts", "subtasks": ["3"]}},
        {"id": "3", "status": "err", "result": None},
        {"id": "4", "status": "ok", "result": "not a mapping"},
    )
    assert finished_outputs(tasks) == [
        {"id": "1", "goal": "Look it up", "task_type": "search", "worker": "search",
         "parent": "root", "atomic": True, "slots": ["sources", "text"]},
        {"id": "2", "goal": "Plan the parts", "task_type": "write", "worker": None,
         "parent": "root", "atomic": False, "slots": ["subtasks", "text"]},
    ]


async def test_the_done_decision_keeps_the_models_reasoning() -> None:
    tasks = _tasks({"id": "1", "status": "ok", "result": {"text": "one"}})
    llm = ScriptedLLM(overrides={"decomposition.done": {
        "synthesis_inputs": {"a": {"from_sub_goal": "1", "slot": "text"}},
        "reasoning": "part one answers the goal"}})
    done = await adone_decision(llm=llm, tasks=tasks, run_goal="a report")
    assert done == {"synthesis_inputs": {"a": {"from_sub_goal": "1", "slot": "text"}},
                    "dropped": [], "reasoning": "part one answers the goal"}
