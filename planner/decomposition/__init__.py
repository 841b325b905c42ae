"""The recursive task-decomposition planner of seeds 002/003/004, registered on import.

An LLM decomposes a goal into a task DAG (WriteHERE XML or JSON, or a forge-lcdl decision
pack), the DAG is validated, ready tasks run in rounds fanned out with ``Send``, non-atomic
tasks are planned again, and a synthesis closes the run.
"""

from __future__ import annotations

from planner.decomposition import scripted  # noqa: F401  (registers the scripted answers)
from planner.decomposition.dag import parse_plan, validate_plan
from planner.decomposition.errors import (
    CycleError,
    DuplicateTaskError,
    MissingStartError,
    PlanError,
    PlanParseError,
    SchemaVersionError,
    UnknownDependencyError,
)
from planner.decomposition.graph import SYNTHESIS_PROMPT, build_graph
from planner.decomposition.parsing import read_plan
from planner.decomposition.planning import PLAN_PROMPT
from planner.decomposition.presentation import present_result
from planner.decomposition.state import (
    INPUT_FIELDS,
    DecompositionState,
    make_input,
    merge_tasks,
)
from planner.decomposition.tasks import STATUSES
from planner.spec import GraphSpec, TaskView

SPEC = (
    GraphSpec(
        name="decomposition",
        title="Recursive task decomposition",
        description=(
            "An LLM decomposes a goal into a task DAG (WriteHERE XML/JSON or a forge-lcdl "
            "decision pack); ready tasks run in parallel rounds, non-atomic tasks are "
            "planned again, clarify tasks ask the operator, and a synthesis closes the run."
        ),
        version=1,
        build=build_graph,
        make_input=make_input,
        input_fields=INPUT_FIELDS,
        tags=("writehere", "forge-lcdl", "f02", "send", "interrupt"),
        present_result=present_result,
        task_view=TaskView(channel="tasks", merge=merge_tasks, statuses=STATUSES, leads=True),
        # a failed worker, a plan that is not valid JSON, a model endpoint down: the graph
        # returns, its synthesis step says the plan failed
        failed_when={"status": "failed"}, failure_label="plan failed",
        failure_reason_key="reason",
        prompts={PLAN_PROMPT.name: PLAN_PROMPT, SYNTHESIS_PROMPT.name: SYNTHESIS_PROMPT},
        tool_nodes=("work",),  # a worker searches, computes or writes one task
        chat_goal_field="goal",
        messages_channel="messages",
        review_questions=True,
        internal_channels=("plans", "decisions", "round", "status", "result",
                           "unknown_dependencies", "messages"),
    )
)

__all__ = [
    "SPEC",
    "CycleError",
    "DecompositionState",
    "DuplicateTaskError",
    "MissingStartError",
    "PlanError",
    "PlanParseError",
    "SchemaVersionError",
    "UnknownDependencyError",
    "build_graph",
    "make_input",
    "parse_plan",
    "read_plan",
    "validate_plan",
]
