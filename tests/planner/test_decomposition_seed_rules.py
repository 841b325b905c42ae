"""Seed 002/003/004 rules that could once break unnoticed: each asserts its observable effect."""

from __future__ import annotations

from typing import Any

from planner.decomposition.parsing import read_plan
from planner.decomposition.planning import aretry_decision
from planner.decomposition.tasks import new_task, ready_ids, settle, stop_all
from planner.llm import ScriptedLLM
from tests.support.decomposition import Run, pack, plans_by_task, statuses, xml_plan


def _tasks(*rows: tuple[str, str, list[str]], parent: str | None = "root") -> dict[str, Any]:
    """``(id, status, deps)`` rows under a running root."""
    out = {"root": {**new_task(task_id="root", goal="g", task_type="plan", atomic=False,
                               parent=None, depth=0), "status": "running"}}
    for tid, status, deps in rows:
        out[tid] = {**new_task(task_id=tid, goal=tid, task_type="write", deps=deps,
                               atomic=True, parent=parent, depth=1), "status": status}
    return out


def test_only_an_ok_dependency_makes_a_task_ready() -> None:
    tasks = _tasks(("a", "ok", []), ("b", "skipped", []), ("c", "running", []),
                   ("x", "pending", ["a"]), ("y", "pending", ["b"]), ("z", "pending", ["c"]))
    assert ready_ids(tasks) == ["x"]


def test_a_skipped_dependency_skips_its_dependents_and_a_failed_one_blocks_them() -> None:
    tasks = _tasks(("a", "skipped", []), ("b", "err", []),
                   ("x", "pending", ["a"]), ("y", "pending", ["b"]), ("s", "running", []))
    out = settle(tasks, policy="continue")
    assert (out["x"]["status"], out["y"]["status"]) == ("skipped", "blocked")
    assert out["x"]["error"] == "dependency a is skipped"


def test_stop_policy_blocks_dependents_of_a_parent_with_a_failed_subtask() -> None:
    tasks = _tasks(("p", "running", []), ("after", "pending", ["p"]), ("other", "pending", []))
    tasks["p"]["atomic"] = False
    tasks.update(_tasks(("p.1", "err", []), ("p.2", "running", []), parent="p"))
    out = settle(tasks, policy="stop_on_first_error")
    assert out["after"]["status"] == "blocked"  # not merely skipped
    assert out["after"]["error"] == "dependency p contains failed task p.1"
    assert out["other"]["status"] == "skipped"


def test_stop_all_skips_running_atomic_tasks_but_not_finished_ones() -> None:
    out = stop_all(_tasks(("a", "running", []), ("b", "ok", []), ("c", "pending", [])),
                   reason="max rounds")
    assert [out[t]["status"] for t in "abc"] == ["skipped", "ok", "skipped"]
    assert out["root"]["status"] == "skipped"  # its subtasks are final: it closes


async def test_a_retry_without_a_new_goal_is_refused() -> None:
    llm = ScriptedLLM(overrides={"decomposition.retry": {"retry": True, "goal": "  "}})
    task = {"id": "7", "goal": "g", "error": "boom", "attempts": 1}
    decision = await aretry_decision(llm=llm, task=task, run_goal="run")
    assert (decision.retry, decision.reasoning) == (False, "retry proposed without a new sub-goal")


async def test_precondition_input_and_unknown_worker_failures_are_never_retried() -> None:
    llm = ScriptedLLM(overrides={
        "decomposition.retry": {"retry": True, "goal": "again"},
        "decomposition.plan": plans_by_task({"root": pack({
            "pre": {"task_id": "llm_enum_route", "input": {"goal": "no labels"}},
            "inp": {"task_id": "think", "input": {"x": {"from_sub_goal": "pre", "slot": "s"}}},
            "unk": {"task_id": "translate", "input": {"goal": "translate"}},
            "fine": {"task_id": "think", "input": {"goal": "a round does run"}},
        })})})
    state = await Run(llm=llm).start(error_policy="continue", max_retries=3)
    assert not [c for c in llm.calls if c[0] == "decomposition.retry"]
    assert state.values["tasks"]["pre"]["error_kind"] == "precondition"
    assert state.values["tasks"]["unk"]["error_kind"] == "unknown_worker"
    assert statuses(state)["inp"] == "blocked"  # its source failed for good


async def test_a_failed_runs_synthesis_leaves_failed_tasks_out() -> None:
    state = await Run().start(inject_failure="worker_error", max_retries=0,
                              error_policy="continue")
    synthesis = state.values["synthesis"]
    assert "(status failed)" in synthesis
    assert "[1]" in synthesis and "[7]" not in synthesis


async def test_ready_tasks_are_dispatched_in_plan_order() -> None:
    llm = ScriptedLLM(overrides={"decomposition.plan": plans_by_task({"root": xml_plan(
        ("c", "third id, first planned", "write", "", True),
        ("a", "first id, second planned", "write", "", True),
        ("b", "second id, third planned", "write", "", True),
    )})})
    state = await Run(llm=llm).start()
    first = next(d for d in state.values["decisions"] if d["action"] == "continue")
    assert first["dispatched"] == ["c", "a", "b"]


def test_static_payload_wins_over_input() -> None:
    plan = read_plan(pack({"t": {"type": "terminal", "input": {"k": "input", "only": 1},
                                  "static_payload": {"k": "static"}}}))
    assert dict(plan.tasks[0].input) == {"k": "static", "only": 1}
