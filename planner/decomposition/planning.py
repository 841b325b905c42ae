"""One planning call: ask the model for a plan, read and validate it, retry on bad output.

The result is a validated plan (or ``None``) and the plan-quality record for ``plans``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from planner.decomposition.dag import validate_plan
from planner.decomposition.errors import PlanError
from planner.decomposition.metrics import plan_metrics
from planner.decomposition.parsing import ParsedPlan, PlannedTask, read_plan
from planner.llm import LLMError, LLMPort
from planner.steering import PromptTemplate, render_prompt

PLAN_ATTEMPTS = 3
"""One call plus two parse retries, each told what was wrong with the last answer."""

_FORM_HELP = {
    "writehere_xml": (
        "Answer with <plan><task><id>1</id><goal>…</goal><task_type>search|think|write|clarify"
        "</task_type><dependency>ids, comma separated</dependency><atom>true|false</atom>"
        "</task></plan>."
    ),
    "writehere_json": (
        'Answer with <result>{"sub_tasks": [{"id": "1", "goal": "…", "task_type": "write", '
        '"dependency": [], "atom": true}]}</result>; nest sub_tasks to plan deeper.'
    ),
    "lcdl_pack": (
        'Answer with a decision pack: {"schema_version": 2, "start": "a", "nodes": {"a": '
        '{"type": "kernel|rank|invoke_pack|terminal", "task_id": "think", "input": {}, '
        '"depends_on": []}}}.'
    ),
}


class RetryDecision(BaseModel):
    """The planner's answer on a failed task: retry it with a new sub-goal, or not."""

    retry: bool
    goal: str | None = None
    reasoning: str = ""


PLAN_PROMPT = PromptTemplate(
    name="plan", label="Plan prompt",
    template=("Decompose this task into subtasks: {goal}\n"
              "Mark a subtask atomic when one worker can do it directly.\n"
              "{form_help}{retry_note}"),
    fields=("goal", "form_help", "retry_note", "depth"),
    help="Asks the model to decompose one task; {form_help} says the plan's form, "
         "{retry_note} what was wrong with its last answer (empty on the first try).")
"""The planning call's prompt, overridable by name (``GraphSpec.prompts``)."""


def plan_prompt(task: Mapping[str, Any], form: str, last_error: str | None) -> str:
    """The prompt a real model gets for planning ``task`` in ``form`` (the run's own
    plan prompt, if it has one)."""
    retry = (f"\nYour previous answer could not be used: {last_error}. Fix that."
             if last_error else "")
    return render_prompt(PLAN_PROMPT, goal=task["goal"], depth=task.get("depth", 0),
                         form_help=_FORM_HELP.get(form, _FORM_HELP["writehere_xml"]),
                         retry_note=retry)


async def aplan_task(
    *,
    llm: LLMPort,
    task: Mapping[str, Any],
    form: str,
    settings: Mapping[str, Any],
    unknown_dependencies: str,
    round_no: int,
) -> tuple[ParsedPlan | None, dict[str, Any]]:
    """Plan ``task``: a validated plan (``None`` after ``PLAN_ATTEMPTS`` failures) and metrics."""
    last_error: str | None = None
    seen: tuple[PlannedTask, ...] = ()
    seen_form: str | None = None
    for attempt in range(1, PLAN_ATTEMPTS + 1):
        context = {
            "task_id": task["id"], "goal": task["goal"], "task_type": task["task_type"],
            "depth": task["depth"], "form": form, "attempt": attempt, "last_error": last_error,
            "settings": dict(settings),
        }
        try:
            text = await llm.atext(
                purpose="decomposition.plan", prompt=plan_prompt(task, form, last_error),
                context=context,
            )
            raw = read_plan(text)
            seen, seen_form = raw.tasks, raw.form
            plan, dropped = validate_plan(raw, unknown_dependencies=unknown_dependencies)  # type: ignore[arg-type]
        except (LLMError, PlanError) as exc:
            last_error = str(exc)
            continue
        return plan, plan_metrics(
            plan.tasks, task_id=task["id"], form=plan.form, parse_retries=attempt - 1,
            dropped_dependencies=dropped, round_no=round_no,
        )
    return None, plan_metrics(
        seen, task_id=task["id"], form=seen_form or form, parse_retries=PLAN_ATTEMPTS - 1,
        error=last_error, round_no=round_no,
    )


async def aretry_decision(
    *, llm: LLMPort, task: Mapping[str, Any], run_goal: str
) -> RetryDecision:
    """Ask the planner whether to retry a failed task, and with which sub-goal."""
    try:
        decision = await llm.astructured(
            purpose="decomposition.retry",
            prompt=(f"Task {task['goal']!r} failed: {task['error']}. Retry it with a new "
                    "sub-goal, or give up?"),
            schema=RetryDecision,
            context={"task_id": task["id"], "goal": task["goal"], "error": task["error"],
                     "attempts": task["attempts"], "run_goal": run_goal},
        )
    except LLMError as exc:
        return RetryDecision(retry=False, reasoning=f"retry decision failed: {exc}")
    if decision.retry and not (decision.goal or "").strip():
        return RetryDecision(retry=False, reasoning="retry proposed without a new sub-goal")
    return decision
