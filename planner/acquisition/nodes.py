"""The planning nodes: tick, bootstrap_gate, prepare, select, decide, decision_policy.

Every state change of the planning phase happens here (routers only read). Each node is
one checkpointed step, so a decision made before an interrupt or a crash is never made
twice on resume.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from planner.acquisition import policy, recipes
from planner.acquisition.asking import question_asked
from planner.acquisition.profile import BOOTSTRAP_FIELDS, get_profile
from planner.acquisition.prompting import PlannerDecision, decide_context, decide_prompt
from planner.acquisition.state import AcquisitionState, decision, provenance_record
from planner.llm import LLMError, LLMPort

Node = Callable[[AcquisitionState], Coroutine[Any, Any, dict[str, Any]]]

DECIDE_PURPOSE = "acquisition.decide"


def _recorded(state: AcquisitionState, d: Any, decided_by: str) -> dict[str, Any]:
    """The update for a deterministic decision that no policy rule may rewrite."""
    record = provenance_record(iteration=state["iterations"], origin="deterministic",
                               decided_by=decided_by, raw=d, rules=[], final=d)
    return {"decision": d, "decision_origin": "deterministic", "decided_by": decided_by,
            "decisions": [record]}


async def tick(state: AcquisitionState) -> dict[str, Any]:
    """Enter a loop iteration: the only writer of ``iterations``; finish when stopped."""
    reset: dict[str, Any] = {"decision": None, "decision_origin": None, "decided_by": None}
    if state["status"] == "aborted":
        reason = f"the run was aborted: {state.get('abort_reason') or 'no reason given'}"
    elif state["iterations"] + 1 > state["max_iters"]:
        reason = f"max_iters ({state['max_iters']}) reached"
    else:
        return {**reset, "iterations": state["iterations"] + 1}
    return _recorded(state, decision("finish", reason=reason), "tick")


async def bootstrap_gate(state: AcquisitionState) -> dict[str, Any]:
    """Ask for region, then currency, before any preparation (through ``ask_user``)."""
    profile = get_profile(state["profile"])
    for name in BOOTSTRAP_FIELDS:
        if not profile.has(name) or not recipes.is_missing(state, name):
            continue
        asked = recipes.ask_count(state, name)
        if asked < profile.bootstrap_attempts:
            spec = profile.field(name)
            d = decision("ask_user", name, reason=f"the {spec.label.lower()} is needed before "
                         f"planning (attempt {asked + 1} of {profile.bootstrap_attempts})")
            return {**_recorded(state, d, "bootstrap_gate"), **question_asked(state, d)}
    return {}


async def prepare(state: AcquisitionState) -> dict[str, Any]:
    """Compose the schema and the dynamic decompositions (recipes stay derived, unstored)."""
    profile = get_profile(state["profile"])
    return {
        "schema": recipes.compose_schema(state, profile),
        "dynamic_decompositions": recipes.compose_decompositions(state, profile),
    }


async def select(state: AcquisitionState) -> dict[str, Any]:
    """Make the deterministic decision when a rule applies; otherwise leave it to ``decide``."""
    d, rule = policy.select_decision(state, get_profile(state["profile"]))
    if d is None:
        return {"decision": None, "decision_origin": None, "decided_by": None}
    return {"decision": d, "decision_origin": "deterministic", "decided_by": f"select:{rule}"}


def make_decide(llm: LLMPort) -> Node:
    """The ``decide`` node: one structured-output call to ``llm``."""

    async def decide(state: AcquisitionState) -> dict[str, Any]:
        """Ask the model for the next action; any failure becomes finish (``llm_error``)."""
        profile = get_profile(state["profile"])
        context = decide_context(state, profile)
        try:
            answer = await llm.astructured(purpose=DECIDE_PURPOSE, prompt=decide_prompt(context),
                                           schema=PlannerDecision, context=context)
            problem = _answer_problem(answer, profile.has)
        except LLMError as exc:
            problem = str(exc)
        if problem:
            d = decision("finish", reason=f"the model failed: {problem}")
            return {"decision": d, "decision_origin": "llm_error", "decided_by": "decide"}
        d = decision(answer.action, answer.field, answer.query, answer.reason)
        return {"decision": d, "decision_origin": "llm", "decided_by": "decide"}

    return decide


def _answer_problem(answer: PlannerDecision, known: Callable[[str], bool]) -> str | None:
    """Why a well-formed answer is still unusable (unknown or absent target field)."""
    if answer.field is not None and not known(answer.field):
        return f"the model named an unknown field {answer.field!r}"
    if answer.action in ("search", "ask_user") and not answer.field:
        return f"the model chose {answer.action} without a field"
    return None


async def decision_policy(state: AcquisitionState) -> dict[str, Any]:
    """Apply the deterministic rewrite rules and record the decision's provenance."""
    profile = get_profile(state["profile"])
    origin = state.get("decision_origin") or "deterministic"
    raw = state.get("decision") or decision("finish", reason="no decision was made")
    final, rules, decomps = policy.apply_policy(state, profile, raw, origin)
    record = provenance_record(iteration=state["iterations"], origin=origin,
                               decided_by=state.get("decided_by") or "select",
                               raw=raw, rules=rules, final=final)
    update: dict[str, Any] = {"decision": final, "decisions": [record],
                              **question_asked(state, final)}
    if decomps != state.get("dynamic_decompositions"):
        update["dynamic_decompositions"] = decomps
    return update
