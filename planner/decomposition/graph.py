"""The decomposition planner graph: start → plan ⇉ work (Send) → join → plan … → synthesize.

``plan`` is F02's round planner: it decomposes every ready non-atomic task (recursively,
down to ``max_depth``), completes ready forge-lcdl terminal nodes, then marks the ready
atomic tasks ``running`` for this round. The ``route`` router fans them out to ``work``
with ``Send`` (in parallel); ``join`` retries failed tasks with a new sub-goal, blocks
dependents of failures and applies the error policy; ``synthesize`` closes the run. F02's
judgement calls (synthesis_inputs, partial success, tone, preconditions at planning time)
live in :mod:`.f02`.

Divergences from the seeds, kept on purpose (table in ``docs/seed-rules.md``):

- ready tasks are dispatched in plan order, not forge-lcdl's "first ready, sorted by
  node_id": a round runs all of them in parallel, so only the list's order differs;
- a pack's ``start`` is validated but does not order execution: the dependencies do;
- retries are decided in ``join`` (F13 feeding F02's next round), which sees the whole
  round's failures in one checkpointed step;
- blocking is eager (forge-lcdl's MVP is lazy), so the DAG shows at once what can never run;
- unknown dependencies raise by default (forge-lcdl is tolerant): the model is told to fix
  its plan; ``unknown_dependencies=drop`` is the tolerant form;
- a failure F02 accepted unblocks its dependents (forge-lcdl: only ``ok`` does).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any, cast

from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from planner.chat import ai, ending_text, human
from planner.decomposition.errors import PlanError
from planner.decomposition.f02 import (
    UNCERTAIN,
    aaccept_decision,
    adone_decision,
    dispatch_problem,
    synthesis_results,
    tone_of,
)
from planner.decomposition.planning import aplan_task, aretry_decision
from planner.decomposition.state import DecompositionState
from planner.decomposition.tasks import (
    FINAL,
    ROOT_ID,
    ROOT_TASK_TYPE,
    Tasks,
    atomic_worker,
    diff,
    graft_plan,
    is_terminal_node,
    new_task,
    ready_ids,
    settle,
    status_counts,
    stop_all,
)
from planner.decomposition.workers import (
    CLARIFY,
    WorkContext,
    Worker,
    WorkerError,
    clarify_request,
    default_workers,
    resolve_inputs,
)
from planner.llm import LLMError, LLMPort
from planner.questions import question_text
from planner.search import SearchError, SearchPort
from planner.steering import PromptTemplate, render_prompt

SYNTHESIS_PROMPT = PromptTemplate(
    name="synthesize", label="Synthesis prompt",
    template="Synthesise the results for: {goal}",
    fields=("goal", "status", "results"),
    help="Asks the model for the run's synthesis; {results} are the finished tasks' results "
         "as JSON, {status} done or failed.")
"""The synthesis call's prompt, overridable by name (``GraphSpec.prompts``)."""

_SETTINGS = ("breadth", "ask_clarifications", "inject_failure", "max_depth")


def build_graph(
    *,
    llm: LLMPort,
    search: SearchPort | None = None,
    workers: Mapping[str, Worker] | None = None,
) -> StateGraph[Any]:
    """Build the uncompiled decomposition graph (the host compiles it with its checkpointer).

    ``workers`` replaces the built-in worker registry (tests and custom hosts).
    """
    registry = dict(workers) if workers is not None else default_workers()

    async def start(state: DecompositionState) -> dict[str, Any]:
        """Create the root task from the goal."""
        root = new_task(task_id=ROOT_ID, goal=state["goal"], task_type=ROOT_TASK_TYPE, atomic=False,
                        parent=None, depth=0)
        return {"tasks": {ROOT_ID: root}, "round": 0, "status": "running", "reason": None,
                "synthesis": None, "synthesis_inputs": None, "result": None}

    async def plan(state: DecompositionState) -> dict[str, Any]:
        """Decompose ready non-atomic tasks, then mark this round's ready tasks running."""
        before: Tasks = state["tasks"]
        work: Tasks = {tid: dict(t) for tid, t in before.items()}
        policy = state["error_policy"]
        round_no = state["round"]
        settings = {k: state.get(k) for k in _SETTINGS}
        records: list[dict[str, Any]] = []
        unmet: list[dict[str, Any]] = []
        while True:
            ready = ready_ids(work)
            terminals = [t for t in ready if work[t]["atomic"] and is_terminal_node(work[t])]
            to_plan = [t for t in ready if not work[t]["atomic"]]
            problems = {
                tid: problem for tid in ready
                if work[tid]["atomic"] and not is_terminal_node(work[tid])
                and (problem := dispatch_problem(work[tid], registry=registry, tasks=work,
                                                 run_goal=state["goal"], llm=llm,
                                                 search=search)) is not None
            }
            if not terminals and not to_plan and not problems:
                break
            for tid, problem in problems.items():  # F02: preconditions at planning time
                work[tid].update(status="err", error=str(problem), error_kind=problem.kind,
                                 round=round_no + 1)
            verdicts = await asyncio.gather(*(
                aaccept_decision(llm=llm, task=work[tid], run_goal=state["goal"])
                for tid in problems
            ))
            for tid, verdict in zip(problems, verdicts, strict=True):
                work[tid]["accepted"] = verdict.accept
                unmet.append({"task": tid, "error": work[tid]["error"],
                              "accepted": verdict.accept, "reasoning": verdict.reasoning})
            for tid in terminals:  # forge-lcdl: a terminal completes with its own input
                work[tid].update(status="ok", result=dict(work[tid]["input"]), round=round_no)
            has_children = {t["parent"] for t in work.values()}
            fresh = [t for t in to_plan if t not in has_children]
            for tid in to_plan:
                work[tid].update(status="running", round=round_no + 1)
            answers = await asyncio.gather(*(
                aplan_task(llm=llm, task=work[tid], form=state["plan_form"], settings=settings,
                           unknown_dependencies=state["unknown_dependencies"],
                           round_no=round_no + 1)
                for tid in fresh
            ))
            for tid, (parsed, record) in zip(fresh, answers, strict=True):
                records.append(record)
                _apply_plan(work, tid, parsed, record, max_depth=state["max_depth"])
            work = settle(work, policy=policy)
        update: dict[str, Any] = {"plans": records}
        dispatch = [t for t in ready_ids(work) if work[t]["atomic"]]
        if work[ROOT_ID]["status"] in FINAL:
            decision = {"round": round_no, "action": "done", "dispatched": []}
            if work[ROOT_ID]["status"] == "ok":  # F02: done names the synthesis inputs
                done = await adone_decision(llm=llm, tasks=work, run_goal=state["goal"])
                decision.update(done)
                update["synthesis_inputs"] = done["synthesis_inputs"]
        elif not dispatch:
            reason = "no task can run: the remaining tasks wait on tasks that never finish"
            work = stop_all(work, reason=reason)
            update.update(status="failed", reason=reason)
            decision = {"round": round_no, "action": "failed", "reason": reason}
        elif round_no >= state["max_rounds"]:
            reason = f"max_rounds {state['max_rounds']} reached with {len(dispatch)} tasks ready"
            work = stop_all(work, reason=reason)
            update.update(status="failed", reason=reason)
            decision = {"round": round_no, "action": "failed", "reason": reason}
        else:
            round_no += 1
            for tid in dispatch:
                work[tid].update(status="running", round=round_no,
                                 worker=work[tid]["worker"] or work[tid]["task_type"])
            decision = {"round": round_no, "action": "continue", "dispatched": dispatch}
            # the questions this round asks, in the transcript while the run waits for them
            update["messages"] = [ai(question_text(clarify_request(work[tid], 1, None)))
                                  for tid in dispatch if work[tid]["worker"] == CLARIFY]
        if unmet:
            decision["unmet"] = unmet
        update.update(tasks=diff(before, work), round=round_no, decisions=[decision])
        return update

    async def route(state: DecompositionState) -> list[Send] | str:
        """Fan this round's running atomic tasks out to ``work``, or close the run."""
        tasks = state["tasks"]
        if state.get("status") != "running":
            return "synthesize"
        sends = [
            Send("work", {
                "task": task,
                "dep_results": {d: tasks[d]["result"] for d in task["deps"]},
                "run_goal": state["goal"],
            })
            for task in tasks.values()
            if task["status"] == "running" and task["atomic"] and task["round"] == state["round"]
        ]
        return sends or "synthesize"

    async def work_node(payload: dict[str, Any]) -> dict[str, Any]:
        """Run one task with its worker; any failure fails this task only."""
        task = payload["task"]
        tid = task["id"]
        name = task["worker"] or task["task_type"]
        attempts = int(task.get("attempts") or 0) + 1
        try:
            # plan checked the worker, the inputs and the preconditions before dispatching
            worker = registry[name]
            inputs = resolve_inputs(task, payload["dep_results"])
            ctx = WorkContext(task=task, inputs=inputs, dep_results=payload["dep_results"],
                              run_goal=payload["run_goal"], llm=llm, search=search)
            result = await worker.run(ctx)
        except GraphBubbleUp:
            raise  # interrupt() must reach LangGraph untouched
        except WorkerError as exc:
            return _failed(tid, str(exc), exc.kind, attempts)
        except (LLMError, SearchError) as exc:
            return _failed(tid, f"worker {name!r} failed: {exc}", "worker", attempts)
        except Exception as exc:  # a worker bug must fail its task, not the whole run
            return _failed(tid, f"worker {name!r} crashed: {type(exc).__name__}: {exc}",
                           "worker", attempts)
        done = {"tasks": {tid: {"status": "ok", "result": result, "error": None,
                                "error_kind": None, "attempts": attempts}}}
        if name == CLARIFY and isinstance(result, Mapping) and "answer" in result:
            return {**done, "messages": [human(str(result["answer"]))]}
        return done

    async def join(state: DecompositionState) -> dict[str, Any]:
        """Apply the round: redo failed or uncertain tasks, accept or block failures, settle."""
        before = state["tasks"]
        round_no = state["round"]
        ran = [t for t in before.values() if t["round"] == round_no and t["atomic"]]
        failed = [t for t in ran if t["status"] == "err" and t["error_kind"] == "worker"
                  and int(t["attempts"]) <= state["max_retries"]]
        # F02 reads the tone of worker outputs: an uncertain result may be redone.
        uncertain = [t for t in ran if t["status"] == "ok" and tone_of(t["result"]) == UNCERTAIN]
        doubtful = [
            {**t, "error": f"its result is uncertain: {_text_of(t['result'])[:200]}"}
            for t in uncertain if int(t["attempts"]) <= state["max_retries"]
        ]
        decisions = await asyncio.gather(*(
            aretry_decision(llm=llm, task=t, run_goal=state["goal"]) for t in failed + doubtful
        ))
        work: Tasks = {tid: dict(t) for tid, t in before.items()}
        retried = []
        for task, decision in zip(failed + doubtful, decisions, strict=True):
            if decision.retry:
                retried.append({"task": task["id"], "goal": decision.goal,
                                "reasoning": decision.reasoning})
                inputs = {k: v for k, v in task["input"].items() if k != "query"}
                work[task["id"]].update(
                    status="pending", goal=decision.goal, result=None, error=None,
                    error_kind=None, round=None, errors=[*task["errors"], task["error"]],
                    input=inputs,  # the new sub-goal is what a search looks up
                )
        redone = {r["task"] for r in retried}
        final = [t for t in ran if t["status"] == "err" and t["id"] not in redone
                 and t.get("accepted") is None]
        verdicts = await asyncio.gather(*(
            aaccept_decision(llm=llm, task=t, run_goal=state["goal"]) for t in final
        ))
        for task, verdict in zip(final, verdicts, strict=True):
            work[task["id"]]["accepted"] = verdict.accept
        work = settle(work, policy=state["error_policy"])
        record = {
            "round": round_no, "action": "join",
            "ok": [t["id"] for t in ran if t["status"] == "ok"],
            "err": [t["id"] for t in ran if t["status"] == "err"],
            "retried": retried,
            "uncertain": [t["id"] for t in uncertain],
            "accepted": [{"task": t["id"], "reasoning": v.reasoning}
                         for t, v in zip(final, verdicts, strict=True) if v.accept],
        }
        return {"tasks": diff(before, work), "decisions": [record]}

    async def synthesize(state: DecompositionState) -> dict[str, Any]:
        """Write the synthesis and the run's ``result``."""
        tasks = state["tasks"]
        root = tasks[ROOT_ID]
        failed = state.get("status") == "failed" or root["status"] != "ok"
        reason = state.get("reason") or (root["error"] if failed else None)
        # F02: a done run synthesises the slots its done-decision named; a failed one (no
        # done-decision) every finished atomic task, its failed tasks left out.
        refs = None if failed else state.get("synthesis_inputs")
        results = synthesis_results(tasks, refs)
        status = "failed" if failed else "done"
        try:
            synthesis: str | None = await llm.atext(
                purpose="decomposition.synthesize",
                prompt=render_prompt(SYNTHESIS_PROMPT, goal=state["goal"], status=status,
                                     results=json.dumps(results, default=str)),
                context={"goal": state["goal"], "status": status, "results": results,
                         "counts": status_counts(tasks)},
            )
        except LLMError as exc:
            synthesis, status, reason = None, "failed", f"synthesis failed: {exc}"
        result = {
            "status": status,
            "synthesis": synthesis,
            "reason": reason,
            "counts": status_counts(tasks),
            "tasks": len(tasks),
            # the same without the root (the goal itself): the tasks its plans laid out
            "plan_counts": status_counts({k: t for k, t in tasks.items() if k != ROOT_ID}),
            "rounds": state["round"],
            "failed_tasks": [t["id"] for t in tasks.values() if t["status"] == "err"],
            "accepted_failures": [t["id"] for t in tasks.values()
                                  if t["status"] == "err" and t.get("accepted") is True],
            "plans": len(state.get("plans") or []),
        }
        said = failure_message(reason, synthesis) if status == "failed" else (
            synthesis or "The run is done.")
        return {"status": status, "synthesis": synthesis, "reason": reason, "result": result,
                "messages": [ai(said)],
                "decisions": [{"round": state["round"], "action": status, "reason": reason}]}

    # typed as Any: LangGraph's add_node overloads cannot match our async node functions
    graph: StateGraph[Any] = StateGraph(DecompositionState)
    graph.add_node("start", start)
    graph.add_node("plan", plan)
    graph.add_node("work", cast(Any, work_node))  # fed by Send with a payload, not the state
    graph.add_node("join", join)
    graph.add_node("synthesize", synthesize)
    graph.add_edge(START, "start")
    graph.add_edge("start", "plan")
    graph.add_conditional_edges("plan", route, ["work", "synthesize"])
    graph.add_edge("work", "join")
    graph.add_edge("join", "plan")
    graph.add_edge("synthesize", END)
    return graph


def failure_message(reason: str | None, synthesis: str | None) -> str:
    """The chat's last message for a failed plan: that it failed and why first, then what
    its synthesis made of the tasks that finished (a chat client shows it as the answer)."""
    said = ending_text("The plan failed", reason)
    return f"{said}\n\nWhat the finished tasks gave: {synthesis}" if synthesis else said


def _text_of(result: Any) -> str:
    return str(result.get("text") if isinstance(result, Mapping) else result)


def _failed(tid: str, message: str, kind: str, attempts: int) -> dict[str, Any]:
    return {"tasks": {tid: {"status": "err", "result": None, "error": message,
                            "error_kind": kind, "attempts": attempts}}}


def _apply_plan(
    work: Tasks, tid: str, parsed: Any, record: Mapping[str, Any], *, max_depth: int
) -> None:
    """Put a planning call's outcome into ``work`` (in place: it is the node's scratch copy)."""
    task = work[tid]
    if parsed is None:
        task.update(status="err", error_kind="plan",
                    error=f"planning failed after {record['parse_retries'] + 1} tries: "
                          f"{record['error']}")
        return
    if not parsed.tasks:  # WriteHERE: an empty plan means the task is atomic after all
        task.update(status="pending", atomic=True, worker=atomic_worker(task))
        return
    try:
        work.update(graft_plan(work, tid, parsed.tasks, max_depth=max_depth))
    except PlanError as exc:
        task.update(status="err", error_kind="plan", error=str(exc))
