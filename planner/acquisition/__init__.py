"""The field-acquisition planner of seeds 000/001, registered as graph ``acquisition``.

Importing this package registers the scripted model's answers; ``SPEC`` declares the graph.
"""

from __future__ import annotations

from planner.acquisition import scripted  # noqa: F401  (registers the scripted answers)
from planner.acquisition.graph import GRAPH_VERSION, NODES, build_graph
from planner.acquisition.inputs import INPUT_FIELDS, make_input
from planner.acquisition.presentation import present_result
from planner.acquisition.prompting import DECIDE_PROMPT
from planner.acquisition.state import AcquisitionState, sources_after_edit
from planner.acquisition.validation import QUESTIONS, state_fields
from planner.spec import GraphSpec

SPEC = GraphSpec(
    name="acquisition",
    title="Field acquisition planner",
    description=(
        "Fills the fields of a market-sizing estimate (region, currency, population, "
        "adoption rate, price) by searching a local corpus and asking the operator, then "
        "calculates the TAM. Every decision records whether a rule or the model made it "
        "and which policy rules rewrote it."
    ),
    version=GRAPH_VERSION,
    build=build_graph,
    make_input=make_input,
    input_fields=INPUT_FIELDS,
    tags=("seed-000", "seed-001", "interrupts"),
    present_result=present_result,
    decisions_channel="decisions",
    tool_nodes=("search",),
    questions=QUESTIONS,
    prompts={DECIDE_PROMPT.name: DECIDE_PROMPT},
    chat_goal_field="goal",
    messages_channel="messages",
    review_questions=True,
    on_state_edit=sources_after_edit,
    state_fields=state_fields,
    internal_channels=(
        "graph_version", "profile", "iterations", "status", "schema", "dynamic_decompositions",
        "decision", "decision_origin", "decided_by", "decisions", "searches",
        "last_observation", "pending_answer", "answers", "calculation", "calc_runs", "notes",
        "result", "abort_reason", "messages"),
)
"""What this graph declares to its host (the registry loads it by module name)."""

__all__ = ["GRAPH_VERSION", "INPUT_FIELDS", "NODES", "SPEC", "AcquisitionState",
           "build_graph", "make_input"]
