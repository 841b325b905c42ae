"""Task records, their transitions (ready, settle, graft), the tasks reducer and the start form."""

from __future__ import annotations

from typing import Any

import pytest

from planner.decomposition.dag import parse_plan
from planner.decomposition.state import DEFAULT_GOAL, INPUT_FIELDS, make_input, merge_tasks
from planner.decomposition.tasks import (
    ROOT_ID,
    diff,
    graft_plan,
    new_task,
    ready_ids,
    settle,
    stop_all,
)
from planner.registry import InputError


def dag(spec: dict[str, list[str]], statuses: dict[str, str] | None = None) -> dict[str, Any]:
    """A running root with atomic children ``id -> deps`` in the given statuses."""
    root = new_task(task_id=ROOT_ID, goal="g", task_type="plan", atomic=False, parent=None,
                    depth=0)
    root["status"] = "running"
    tasks = {ROOT_ID: root}
    for tid, deps in spec.items():
        tasks[tid] = new_task(task_id=tid, goal=tid, task_type="write", deps=deps, atomic=True,
                              parent=ROOT_ID, depth=1, worker="write")
    for tid, status in (statuses or {}).items():
        tasks[tid]["status"] = status
        if status == "err":
            tasks[tid]["error"] = f"{tid} broke"
    return tasks


def status_of(tasks: dict[str, Any]) -> dict[str, str]:
    return {tid: t["status"] for tid, t in tasks.items()}


def test_ready_means_pending_with_every_dependency_ok() -> None:
    tasks = dag({"a": [], "b": ["a"], "c": ["a", "b"], "d": []}, {"a": "ok", "d": "running"})
    assert ready_ids(tasks) == ["b"]


def test_children_of_a_pending_parent_are_not_ready() -> None:
    tasks = dag({"p": []})
    tasks["p"]["atomic"] = False
    tasks["p.1"] = new_task(task_id="p.1", goal="x", task_type="write", atomic=True,
                            parent="p", depth=2)
    tasks["p"]["status"] = "pending"
    tasks[ROOT_ID]["status"] = "running"
    assert "p.1" not in ready_ids(tasks)


def test_continue_policy_blocks_descendants_and_leaves_other_branches_pending() -> None:
    tasks = dag({"a": [], "b": ["a"], "c": ["b"], "d": []}, {"a": "err"})
    out = settle(tasks, policy="continue")
    assert status_of(out) == {ROOT_ID: "running", "a": "err", "b": "blocked",
                              "c": "blocked", "d": "pending"}
    assert out["c"]["error"] == "dependency b is blocked"


def test_stop_policy_blocks_descendants_and_skips_everything_else() -> None:
    tasks = dag({"a": [], "b": ["a"], "d": [], "e": ["d"]}, {"a": "err", "d": "ok"})
    out = settle(tasks, policy="stop_on_first_error")
    assert status_of(out) == {ROOT_ID: "err", "a": "err", "b": "blocked", "d": "ok",
                              "e": "skipped"}
    assert "stop_on_first_error" in out["e"]["error"]
    assert out[ROOT_ID]["error"] == "subtask a failed: a broke"


def test_stop_policy_blocks_dependents_of_a_parent_holding_the_failure() -> None:
    tasks = dag({"p": [], "q": ["p"], "r": []}, {"p": "running"})
    tasks["p"]["atomic"] = False
    tasks["p.1"] = new_task(task_id="p.1", goal="x", task_type="write", atomic=True,
                            parent="p", depth=2)
    tasks["p.1"]["status"] = "err"
    tasks["p.1"]["error"] = "boom"
    out = settle(tasks, policy="stop_on_first_error")
    assert out["q"]["status"] == "blocked"  # q depends on p, which holds the failed p.1
    assert out["r"]["status"] == "skipped"
    assert out["p"]["status"] == "err"


def test_parent_closes_ok_with_its_subtasks_text() -> None:
    tasks = dag({"a": [], "b": []}, {"a": "ok", "b": "ok"})
    tasks["a"]["result"] = {"text": "one"}
    tasks["b"]["result"] = {"text": "two"}
    out = settle(tasks, policy="continue")
    assert out[ROOT_ID]["status"] == "ok"
    assert out[ROOT_ID]["result"] == {"subtasks": ["a", "b"], "text": "one\n\ntwo"}


def test_settle_does_not_mutate_its_input_and_rejects_unknown_policy() -> None:
    tasks = dag({"a": [], "b": ["a"]}, {"a": "err"})
    settle(tasks, policy="continue")
    assert tasks["b"]["status"] == "pending"
    with pytest.raises(ValueError, match="error policy 'explode' is unknown"):
        settle(tasks, policy="explode")


def test_stop_all_skips_unfinished_tasks_and_closes_parents() -> None:
    out = stop_all(dag({"a": [], "b": []}, {"a": "ok"}), reason="max_rounds 1 reached")
    assert status_of(out) == {ROOT_ID: "skipped", "a": "ok", "b": "skipped"}
    assert out["b"]["error"] == "max_rounds 1 reached"


def test_graft_prefixes_ids_rewrites_slot_refs_and_caps_depth() -> None:
    tasks = dag({"3": []}, {"3": "running"})
    tasks["3"]["atomic"] = False
    plan = parse_plan({"schema_version": 2, "start": "a", "nodes": {
        "a": {"task_id": "think"},
        "b": {"type": "invoke_pack", "input": {"x": {"from_sub_goal": "a", "slot": "text"}}},
    }})
    new = graft_plan(tasks, "3", plan.tasks, max_depth=2)
    assert list(new) == ["3.a", "3.b"]
    assert new["3.b"]["deps"] == ["3.a"]
    assert new["3.b"]["input"]["x"] == {"from_sub_goal": "3.a", "slot": "text"}
    assert (new["3.a"]["parent"], new["3.a"]["depth"]) == ("3", 2)
    # invoke_pack at the depth cap is executed instead of planned again
    assert (new["3.b"]["atomic"], new["3.b"]["forced_atomic"]) == (True, True)


def test_graft_of_the_root_keeps_plan_ids() -> None:
    tasks = dag({})
    plan = parse_plan("<plan><task><id>1</id><goal>g</goal><task_type>write</task_type>"
                      "</task></plan>")
    assert list(graft_plan(tasks, ROOT_ID, plan.tasks, max_depth=3)) == ["1"]


def test_merge_tasks_reducer_merges_parallel_patches_field_by_field() -> None:
    base = dag({"a": [], "b": []}, {"a": "running", "b": "running"})
    left = merge_tasks(base, {"a": {"status": "ok", "result": {"text": "A"}}})
    both = merge_tasks(left, {"b": {"status": "err", "error": "B"}})
    assert (both["a"]["status"], both["b"]["status"]) == ("ok", "err")
    assert both["a"]["goal"] == "a"  # untouched fields survive a patch
    assert base["a"]["status"] == "running"  # the reducer never mutates


def test_diff_holds_only_changed_fields_and_new_tasks() -> None:
    before = dag({"a": []})
    after = {k: dict(v) for k, v in before.items()}
    after["a"]["status"] = "ok"
    after["z"] = new_task(task_id="z", goal="z", task_type="write", atomic=True,
                          parent=ROOT_ID, depth=1)
    patches = diff(before, after)
    assert patches["a"] == {"status": "ok"}
    assert patches["z"]["id"] == "z"
    assert ROOT_ID not in patches


# --- start form ----------------------------------------------------------------------------


def test_make_input_defaults() -> None:
    state = make_input({})
    assert state["goal"] == DEFAULT_GOAL
    assert state["plan_form"] == "writehere_xml"
    assert state["error_policy"] == "stop_on_first_error"
    assert (state["max_rounds"], state["max_depth"], state["breadth"]) == (8, 3, 2)
    assert state["ask_clarifications"] is False and state["inject_failure"] == "none"
    assert set(state) == {f.name for f in INPUT_FIELDS} | {"messages"}
    [goal] = state["messages"]  # the transcript opens with the goal
    assert (goal["type"], goal["content"]) == ("human", DEFAULT_GOAL) and goal["id"]


def test_make_input_converts_web_form_strings() -> None:
    state = make_input({"goal": " Plan a fair ", "plan_form": "LCDL_PACK", "max_rounds": "12",
                        "ask_clarifications": "on", "error_policy": "continue",
                        "inject_failure": "worker_error", "breadth": 14.0})
    assert state["goal"] == "Plan a fair"
    assert state["plan_form"] == "lcdl_pack"
    assert (state["max_rounds"], state["breadth"]) == (12, 14)
    assert state["ask_clarifications"] is True
    assert state["inject_failure"] == "worker_error"


def test_make_input_errors_name_the_bad_value_and_the_allowed_ones() -> None:
    with pytest.raises(InputError) as info:
        make_input({"plan_form": "yaml", "max_rounds": "0", "max_depth": "deep", "goal": "  ",
                    "ask_clarifications": "perhaps", "error_policy": "ignore"})
    errors = info.value.errors
    assert errors["plan_form"] == (
        "'yaml' is not one of: writehere_xml, writehere_json, lcdl_pack"
    )
    assert errors["max_rounds"] == "0 is out of range; use 1 to 50"
    assert errors["max_depth"] == "'deep' is not a whole number"
    assert errors["goal"].startswith("the goal is empty")
    assert "use true or false" in errors["ask_clarifications"]
    assert "stop_on_first_error, continue" in errors["error_policy"]


def test_unknown_input_fields_are_refused_as_by_every_graph() -> None:
    with pytest.raises(InputError) as info:
        make_input({"goal": "x", "colour": "red"})
    assert info.value.errors == {"__all__": "unknown input field(s) 'colour'; accepted fields: "
                                 + ", ".join(f.name for f in INPUT_FIELDS)}
