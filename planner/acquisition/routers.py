"""The conditional-edge functions: side-effect free, they only read state and name a node."""

from __future__ import annotations

from typing import Any

from planner.acquisition.state import AcquisitionState


def _action(state: AcquisitionState) -> str | None:
    decided: dict[str, Any] = dict(state.get("decision") or {})
    action = decided.get("action")
    return str(action) if action is not None else None


async def route_after_tick(state: AcquisitionState) -> str:
    """finish when tick stopped the run, else bootstrap_gate."""
    return "finish" if _action(state) == "finish" else "bootstrap_gate"


async def route_after_bootstrap(state: AcquisitionState) -> str:
    """ask_user when a bootstrap question is due, else prepare."""
    return "ask_user" if _action(state) == "ask_user" else "prepare"


async def route_after_select(state: AcquisitionState) -> str:
    """decision_policy for a deterministic decision, else decide (the LLM)."""
    if state.get("decision") and state.get("decision_origin") == "deterministic":
        return "decision_policy"
    return "decide"


async def route_after_policy(state: AcquisitionState) -> str:
    """The node named by the final decision's action (finish when there is none)."""
    action = _action(state)
    return action if action in ("search", "ask_user", "calculate", "reflect") else "finish"


async def route_after_search(state: AcquisitionState) -> str:
    """observe when the search produced an observation, else back to tick."""
    return "observe" if state.get("last_observation") else "tick"
