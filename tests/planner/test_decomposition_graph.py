"""End-to-end runs of the decomposition graph with the scripted model and an in-memory saver."""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
import time
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import StateGraph
from langgraph.types import Command

from planner.decomposition import SPEC, build_graph, make_input
from planner.decomposition.workers import Worker, WorkerError, default_workers
from planner.llm import ScriptedLLM
from planner.registry import get_graph
from planner.search import SearchHit
from tests.support.decomposition import (
    FakeSearch,
    Run,
    pack,
    plans_by_task,
    statuses,
    xml_plan,
)

TASK_KEYS = {"id", "goal", "task_type", "deps", "atomic", "status", "result", "error", "parent",
             "depth", "worker", "round"}


# --- scripted runs per plan form -----------------------------------------------------------


async def _assert_done(form: str) -> Any:
    state = await Run().start(plan_form=form)
    values = state.values
    assert values["status"] == "done"
    assert set(statuses(state).values()) == {"ok"}
    assert 5 <= len(values["tasks"]) <= 15
    assert values["round"] == 3
    assert values["synthesis"].startswith("Synthesis for: Write a short briefing")
    # the done-decision named the written parts (3 and 4): the groundwork stays out
    assert values["synthesis_inputs"] == {
        "part_3": {"from_sub_goal": "3", "slot": "text"},
        "part_4": {"from_sub_goal": "4", "slot": "text"},
    }
    assert "[3] Section 1: costs and savings" in values["synthesis"]
    assert "[4] Write the closing summary" in values["synthesis"]
    assert "[1]" not in values["synthesis"] and "[2]" not in values["synthesis"]
    result = values["result"]
    assert result["status"] == "done" and result["synthesis"] == values["synthesis"]
    assert result["counts"]["ok"] == len(values["tasks"]) and result["rounds"] == 3
    assert values["plans"][0]["form"] == form and values["plans"][0]["task_id"] == "root"
    sub = values["tasks"]["3.1"]
    assert (sub["parent"], sub["depth"], sub["worker"]) == ("3", 2, "write")
    assert not state.next  # the graph ended
    return values


async def test_writehere_xml_run_reaches_done_with_a_synthesis() -> None:
    values = await _assert_done("writehere_xml")
    assert [p["task_id"] for p in values["plans"]] == ["root", "3"]


async def test_writehere_json_run_plans_nested_subtasks_in_one_answer() -> None:
    values = await _assert_done("writehere_json")
    assert [p["task_id"] for p in values["plans"]] == ["root"]  # 3.x came nested
    assert values["plans"][0]["levels"] == 2


async def test_lcdl_pack_run_completes_terminals_with_their_input() -> None:
    values = await _assert_done("lcdl_pack")
    tasks = values["tasks"]
    assert tasks["done"]["result"]["done"] is True
    assert tasks["done"]["worker"] == "lcdl.terminal"
    assert tasks["2"]["worker"] == "think"  # from metadata.default_task_id
    assert tasks["3"]["task_type"] == "invoke_pack"
    # the summary's input referenced task 2's "text" slot and received it
    assert "Key points" in tasks["4"]["result"]["text"]


async def test_every_checkpoint_holds_the_whole_dag_as_plain_json() -> None:
    run = Run()
    await run.start(ask_clarifications=False)
    history = [s async for s in run.graph.aget_state_history(run.config)]
    with_tasks = [s for s in history if s.values.get("tasks")]
    assert len(with_tasks) >= 6
    for snap in with_tasks:
        json.dumps(snap.values)
        for task in snap.values["tasks"].values():
            assert set(task) >= TASK_KEYS
    for _ns, mode, data in run.parts:
        if mode == "updates":
            json.dumps({k: v for k, v in data.items() if k != "__interrupt__"})


# --- error policies ------------------------------------------------------------------------


async def test_failing_worker_under_stop_on_first_error() -> None:
    state = await Run().start(inject_failure="worker_error", max_retries=0)
    assert statuses(state) == {"root": "err", "1": "ok", "2": "ok", "7": "err",
                               "3": "skipped", "4": "blocked"}
    tasks = state.values["tasks"]
    assert tasks["7"]["error"].startswith("source unreachable")
    assert tasks["4"]["error"] == "dependency 7 is err"
    assert "stop_on_first_error" in tasks["3"]["error"]
    assert state.values["status"] == "failed"
    assert state.values["result"]["counts"] == {"pending": 0, "running": 0, "ok": 2, "err": 2,
                                                "blocked": 1, "skipped": 1}
    assert state.values["synthesis"]  # a failed run still closes with a synthesis


async def test_failing_worker_under_continue_lets_other_branches_finish() -> None:
    state = await Run().start(inject_failure="worker_error", max_retries=0,
                              error_policy="continue")
    assert statuses(state) == {"root": "err", "1": "ok", "2": "ok", "7": "err", "3": "ok",
                               "4": "blocked", "3.1": "ok", "3.2": "ok"}
    assert state.values["status"] == "failed"
    assert state.values["result"]["failed_tasks"] == ["root", "7"]


async def test_stop_policy_blocks_dependents_of_a_parent_whose_subtask_failed() -> None:
    llm = ScriptedLLM(overrides={"decomposition.plan": plans_by_task({
        "root": xml_plan(("a", "part a", "write", "", False), ("b", "after a", "write", "a", True),
                         ("d", "other", "write", "", True), ("c", "after d", "write", "d", True)),
        "a": xml_plan(("1", "unreachable source", "unreliable", "", True),
                      ("2", "after a.1", "write", "1", True), ("3", "beside", "write", "", True)),
    })})
    state = await Run(llm=llm).start(max_retries=0)
    assert statuses(state) == {"root": "err", "a": "err", "b": "blocked", "d": "ok",
                               "c": "skipped", "a.1": "err", "a.2": "blocked", "a.3": "ok"}


async def test_planner_retries_a_failed_task_with_a_new_sub_goal() -> None:
    state = await Run().start(inject_failure="flaky", max_retries=1)
    task = state.values["tasks"]["7"]
    assert (task["status"], task["attempts"]) == ("ok", 2)
    assert task["goal"] == "Fetch usage figures from the public data portal"
    assert task["errors"] == ["source unreachable for "
                              "'Fetch usage figures from the unreachable archive (flaky)'"]
    retried = [r for d in state.values["decisions"] for r in d.get("retried", [])]
    assert retried[0]["task"] == "7"
    assert state.values["status"] == "done"


async def test_unknown_worker_fails_that_task_naming_the_registered_ones() -> None:
    state = await Run().start(inject_failure="unknown_worker", error_policy="continue")
    task = state.values["tasks"]["7"]
    assert task["status"] == "err" and task["error_kind"] == "unknown_worker"
    assert task["attempts"] == 0  # found at planning time: never dispatched, never retried
    assert not any("7" in d.get("dispatched", []) for d in state.values["decisions"])
    assert "unknown worker 'translate'" in task["error"] and "write" in task["error"]


async def test_model_failure_in_a_worker_fails_its_task_not_the_run() -> None:
    state = await Run(llm=ScriptedLLM(fail={"decomposition.think"})).start()
    assert state.values["tasks"]["2"]["status"] == "err"
    assert "scripted failure" in state.values["tasks"]["2"]["error"]
    assert state.values["status"] == "failed" and state.values["result"] is not None


# --- forge-lcdl workers, preconditions and slot references ---------------------------------


async def test_unmet_precondition_fails_the_task_and_a_met_one_runs() -> None:
    llm = ScriptedLLM(overrides={"decomposition.plan": plans_by_task({"root": pack({
        "gate": {"task_id": "llm_boolean_gate", "input": {"question": "Feasible?"}},
        "route": {"task_id": "llm_enum_route", "input": {"labels": ["left", "right"]}},
        "bad": {"task_id": "llm_enum_route", "input": {"goal": "route with no labels"}},
    })})})
    state = await Run(llm=llm).start(error_policy="continue")
    tasks = state.values["tasks"]
    assert tasks["gate"]["result"]["answer"] is True
    assert tasks["route"]["result"]["label"] == "left"
    assert tasks["bad"]["status"] == "err" and tasks["bad"]["error_kind"] == "precondition"
    assert tasks["bad"]["error"] == (
        "precondition of worker 'llm_enum_route' not met: input has a non-empty 'labels' list"
    )


async def test_inputs_reference_another_tasks_output_slot() -> None:
    seen: dict[str, Any] = {}

    async def echo(ctx: Any) -> dict[str, Any]:
        seen[ctx.task["id"]] = dict(ctx.inputs)
        return {"text": "echo"}

    workers = {**default_workers(), "echo": Worker("echo", "returns its inputs", echo)}
    llm = ScriptedLLM(overrides={"decomposition.plan": plans_by_task({"root": pack({
        "a": {"task_id": "think", "input": {"goal": "think first"}},
        "b": {"task_id": "echo", "input": {"facts": {"from_sub_goal": "a", "slot": "text"}}},
        "c": {"task_id": "echo", "input": {"x": {"from_sub_goal": "a", "slot": "nope"}}},
    })})})
    state = await Run(llm=llm, workers=workers).start(error_policy="continue")
    assert seen["b"]["facts"].startswith("Key points for 'think first'")
    assert state.values["tasks"]["b"]["deps"] == ["a"]
    assert state.values["tasks"]["c"]["error"] == (
        "input 'x' wants slot 'nope' of task 'a', which has slots: text"
    )


# --- rounds, depth and planning failures ---------------------------------------------------


async def test_max_rounds_ends_the_run_as_failed() -> None:
    state = await Run().start(max_rounds=1)
    values = state.values
    assert values["status"] == "failed"
    assert values["reason"] == "max_rounds 1 reached with 2 tasks ready"
    assert statuses(state)["3.1"] == "skipped" and statuses(state)["4"] == "skipped"
    assert values["result"]["rounds"] == 1


async def test_depth_cap_executes_non_atomic_tasks_instead_of_planning_them() -> None:
    state = await Run().start(max_depth=1)
    task = state.values["tasks"]["3"]
    assert (task["atomic"], task["forced_atomic"], task["status"]) == (True, True, "ok")
    assert not any(t["parent"] == "3" for t in state.values["tasks"].values())


async def test_empty_plan_makes_the_task_atomic() -> None:
    llm = ScriptedLLM(overrides={"decomposition.plan": plans_by_task({
        "root": xml_plan(("1", "write it", "write", "", False)),
    })})
    state = await Run(llm=llm).start()
    assert statuses(state) == {"root": "ok", "1": "ok"}
    assert state.values["tasks"]["1"]["atomic"] is True


async def test_malformed_plan_is_retried_then_fails_the_task() -> None:
    state = await Run(llm=ScriptedLLM(malformed={"decomposition.plan"})).start()
    record = state.values["plans"][0]
    assert (record["ok"], record["parse_retries"]) == (False, 2)
    assert state.values["tasks"]["root"]["status"] == "err"
    assert state.values["tasks"]["root"]["error_kind"] == "plan"
    assert state.values["status"] == "failed"


async def test_parse_retry_recovers_and_is_counted() -> None:
    answers = iter(["```json\n{broken", xml_plan(("1", "write it", "write", "", True))])
    llm = ScriptedLLM(overrides={"decomposition.plan": lambda ctx: next(answers)})
    state = await Run(llm=llm).start()
    assert state.values["status"] == "done"
    assert state.values["plans"][0]["parse_retries"] == 1
    assert llm.calls[1][1]["last_error"].startswith("plan is not valid JSON")


async def test_cyclic_plan_is_recorded_with_its_cycle() -> None:
    cyclic = xml_plan(("1", "a", "write", "2", True), ("2", "b", "write", "1", True))
    llm = ScriptedLLM(overrides={"decomposition.plan": cyclic})
    state = await Run(llm=llm).start()
    record = state.values["plans"][0]
    assert record["cycles_found"] == 1 and record["cycles"] == [["1", "2", "1"]]
    assert "dependency cycle in plan: 1 → 2 → 1" in state.values["tasks"]["root"]["error"]


async def test_breadth_makes_a_large_plan_for_the_dashboard() -> None:
    state = await Run().start(breadth=14)
    assert 190 <= len(state.values["tasks"]) <= 240
    assert state.values["status"] == "done"
    assert max(t["depth"] for t in state.values["tasks"].values()) == 3


# --- parallel fan-out ----------------------------------------------------------------------


def _plan_two(task_type: str) -> ScriptedLLM:
    return ScriptedLLM(overrides={"decomposition.plan": plans_by_task({
        "root": xml_plan(("a", "first", task_type, "", True), ("b", "second", task_type, "", True)),
    })})


async def test_fan_out_runs_workers_concurrently() -> None:
    # Each worker waits until BOTH have started: run one after the other, this deadlocks and
    # wait_for fails the test. No wall-clock limit is asserted (shared, noisy machine).
    started = {"a": asyncio.Event(), "b": asyncio.Event()}

    async def barrier(ctx: Any) -> dict[str, Any]:
        started[ctx.task["id"]].set()
        await asyncio.gather(*(e.wait() for e in started.values()))
        return {"text": "met"}

    workers = {**default_workers(), "barrier": Worker("barrier", "waits for the other", barrier)}
    run = Run(llm=_plan_two("barrier"), workers=workers)
    state = await asyncio.wait_for(run.start(), timeout=10)
    assert statuses(state) == {"root": "ok", "a": "ok", "b": "ok"}
    assert state.values["tasks"]["a"]["round"] == state.values["tasks"]["b"]["round"] == 1


async def test_fan_out_intervals_of_two_slow_workers_overlap() -> None:
    spans: dict[str, tuple[float, float]] = {}

    async def slow(ctx: Any) -> dict[str, Any]:
        begin = time.monotonic()
        await asyncio.sleep(0.2)
        spans[ctx.task["id"]] = (begin, time.monotonic())
        return {"text": "slept"}

    workers = {**default_workers(), "slow": Worker("slow", "sleeps 0.2 s", slow)}
    await Run(llm=_plan_two("slow"), workers=workers).start()
    (a0, a1), (b0, b1) = spans["a"], spans["b"]
    assert a0 < b1 and b0 < a1  # sequential runs could not overlap


# --- clarify interrupts --------------------------------------------------------------------


async def test_two_parallel_clarify_questions_are_resumed_by_interrupt_id() -> None:
    run = Run()
    state = await run.start(ask_clarifications=True, plan_form="lcdl_pack")
    pending = {i.value["task_id"]: i for i in state.interrupts}
    assert set(pending) == {"5", "6"}
    assert pending["5"].value == {
        "field": "5", "prompt": "Who is the audience of the briefing?", "kind": "choice",
        "choices": ["council members", "residents", "investors"], "constraints": {},
        "attempt": 1, "reason": None, "task_id": "5",
    }
    assert pending["6"].value["kind"] == "text"
    assert statuses(state)["5"] == statuses(state)["6"] == "running"
    # answer one question; the other stays pending under its own id
    state = await run.go(Command(resume={pending["6"].id: "plain and friendly"}))
    assert [i.id for i in state.interrupts] == [pending["5"].id]
    assert state.values["tasks"]["6"]["result"]["answer"] == "plain and friendly"
    state = await run.go(Command(resume={pending["5"].id: "Residents"}))
    assert not state.interrupts
    assert state.values["tasks"]["5"]["result"]["answer"] == "residents"
    assert state.values["status"] == "done"


async def test_both_clarify_answers_in_one_resume() -> None:
    run = Run()
    state = await run.start(ask_clarifications=True, plan_form="writehere_json")
    answers = {i.id: "residents" if i.value["task_id"] == "5" else "warm"
               for i in state.interrupts}
    assert len(answers) == 2
    state = await run.go(Command(resume=answers))
    assert state.values["status"] == "done"
    assert state.values["tasks"]["6"]["result"]["answer"] == "warm"


async def test_invalid_choice_is_asked_again_with_the_reason() -> None:
    run = Run()
    state = await run.start(ask_clarifications=True, plan_form="lcdl_pack")
    first = next(i for i in state.interrupts if i.value["task_id"] == "5")
    state = await run.go(Command(resume={first.id: "aliens"}))
    again = next(i for i in state.interrupts if i.value["task_id"] == "5")
    assert again.id != first.id
    assert (again.value["attempt"], again.value["reason"]) == (
        2, "'aliens' is not one of: council members, residents, investors"
    )


async def test_clarify_that_never_gets_an_answer_fails() -> None:
    llm = _plan_two("clarify")
    run = Run(llm=llm)
    state = await run.start(error_policy="continue")
    for _ in range(3):
        state = await run.go(Command(resume={i.id: "" for i in state.interrupts}))
    assert not state.interrupts
    assert statuses(state)["a"] == "err"
    assert "no usable answer after 3 attempts" in state.values["tasks"]["a"]["error"]


# --- registry and purity -------------------------------------------------------------------


def test_registered_spec_builds_an_uncompiled_graph_with_async_nodes() -> None:
    spec = get_graph("decomposition")
    assert spec is SPEC and spec.version == 1
    assert {f.name for f in spec.input_fields} >= {
        "goal", "plan_form", "error_policy", "max_rounds", "max_depth", "breadth",
        "ask_clarifications", "inject_failure",
    }
    builder = spec.build(llm=ScriptedLLM(), search=FakeSearch())
    assert isinstance(builder, StateGraph)
    assert set(builder.nodes) == {"start", "plan", "work", "join", "synthesize"}
    for node in builder.nodes.values():
        assert inspect.iscoroutinefunction(node.runnable.afunc)
    for branches in builder.branches.values():
        for branch in branches.values():
            assert inspect.iscoroutinefunction(branch.path.afunc)


def test_worker_error_kind_defaults_to_worker() -> None:
    assert WorkerError("x").kind == "worker"


def test_importing_the_package_pulls_in_no_web_framework() -> None:
    code = ("import sys, planner.decomposition; "
            "bad = [m for m in sys.modules if m.split('.')[0] in "
            "('django', 'dashboard', 'channels', 'rest_framework')]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


# --- seed bugs (issue 33) ------------------------------------------------------------------


async def test_empty_root_plan_executes_the_goal_with_the_write_worker() -> None:
    # WriteHERE: "if len(raw_plan) == 0: # Atomic task" holds for the root goal too.
    llm = ScriptedLLM(overrides={"decomposition.plan": "<plan></plan>"})
    state = await Run(llm=llm).start()
    root = state.values["tasks"]["root"]
    assert (root["status"], root["atomic"], root["worker"]) == ("ok", True, "write")
    assert root["result"]["text"].startswith("Write a short briefing")
    assert state.values["status"] == "done"


async def test_depth_cap_holds_for_nested_json_sub_tasks() -> None:
    state = await Run().start(plan_form="writehere_json", max_depth=1)
    tasks = state.values["tasks"]
    assert max(t["depth"] for t in tasks.values()) == 1
    assert (tasks["3"]["atomic"], tasks["3"]["forced_atomic"], tasks["3"]["status"]) == (
        True, True, "ok")
    assert state.values["status"] == "done"


async def test_a_search_that_finds_nothing_fails_its_task_and_stays_out_of_the_synthesis(
) -> None:
    class NoHits:
        async def asearch(self, query: str, *, field: str | None = None) -> list[SearchHit]:
            return []

    builder = build_graph(llm=ScriptedLLM(), search=NoHits())
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke(make_input({"max_retries": 0, "error_policy": "continue"}), config)
    values = (await graph.aget_state(config)).values
    task = values["tasks"]["1"]
    assert (task["status"], task["error_kind"]) == ("err", "worker")
    assert task["error"].startswith("search for 'Gather background on: Write a short")
    assert task["error"].endswith("found nothing")
    assert "no hits" not in values["synthesis"] and "[1]" not in values["synthesis"]
