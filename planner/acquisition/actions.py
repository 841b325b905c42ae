"""The action nodes: search, observe, calculate, ask_user, observe_user, reflect, finish.

``ask_user`` is the only node that interrupts. LangGraph re-runs an interrupted node from
its start on resume, so it only reads state before ``interrupt()`` and writes after it.
"""

from __future__ import annotations

import math
from typing import Any

from langgraph.types import interrupt

from planner.acquisition import recipes
from planner.acquisition.asking import answer_message, question_for, result_message
from planner.acquisition.nodes import Node
from planner.acquisition.profile import get_profile
from planner.acquisition.state import AcquisitionState
from planner.acquisition.validation import check_answer
from planner.search import SearchError, SearchPort


def make_search(search: SearchPort) -> Node:
    """The ``search`` node over a search port."""

    async def search_node(state: AcquisitionState) -> dict[str, Any]:
        """Run the decided query; hand the best hit to ``observe``, or none (back to tick)."""
        d: dict[str, Any] = dict(state["decision"] or {})
        field, query = d.get("field"), d.get("query") or ""
        entry: dict[str, Any] = {"iteration": state["iterations"], "field": field,
                                 "query": query, "hits": 0, "error": None, "source": None}
        try:
            hits = await search.asearch(query, field=field)
        except SearchError as exc:
            return {"searches": [{**entry, "error": str(exc)}], "last_observation": None}
        usable = [h for h in hits if h.field in (None, field) and h.value is not None]
        entry["hits"] = len(hits)
        if not usable:
            return {"searches": [entry], "last_observation": None}
        hit = usable[0]
        entry["source"] = hit.source
        observation = {"field": field, "value": hit.value, "source": hit.source,
                       "title": hit.title, "snippet": hit.snippet, "query": query}
        return {"searches": [entry], "last_observation": observation}

    search_node.__name__ = "search"
    return search_node


async def observe(state: AcquisitionState) -> dict[str, Any]:
    """Take the value a search found, if it is valid for the field."""
    obs = state.get("last_observation") or {}
    profile = get_profile(state["profile"])
    field = obs.get("field")
    note = {"kind": "observation", "iteration": state["iterations"], "field": field,
            "source": obs.get("source"), "title": obs.get("title")}
    update: dict[str, Any] = {"last_observation": None}
    value, reason = check_answer(profile.field(field), obs.get("value")) if profile.has(
        field) else (None, f"unknown field {field!r}")
    if reason is not None:
        return {**update, "notes": [{**note, "accepted": False, "reason": reason}]}
    return {
        **update,
        "values": {**state["values"], field: value},
        "sources": {**state["sources"], field: obs.get("source") or "search"},
        "notes": [{**note, "accepted": True, "value": value}],
    }


async def calculate(state: AcquisitionState) -> dict[str, Any]:
    """Multiply a derived field's components; blocked when any component is missing."""
    profile = get_profile(state["profile"])
    d: dict[str, Any] = dict(state.get("decision") or {})
    target = d.get("field") if profile.has(d.get("field")) else None
    spec = profile.field(target) if target else profile.derived[0]
    if spec.strategy != "derived":
        spec = profile.derived[0]
    values = state["values"]
    missing = recipes.missing_components(state, spec)
    calc: dict[str, Any] = {
        "target": spec.name, "iteration": state["iterations"],
        "formula": " * ".join(spec.components),
        "inputs": {c: values.get(c) for c in spec.components if c not in missing},
        "missing": missing, "value": None,
        "status": "blocked" if missing else "success",
    }
    update: dict[str, Any] = {"calculation": calc, "calc_runs": state["calc_runs"] + 1}
    if not missing:
        calc["value"] = round(math.prod(float(values[c]) for c in spec.components), 2)
        update["values"] = {**values, spec.name: calc["value"]}
        update["sources"] = {**state["sources"], spec.name: "calculator"}
    return update


async def ask_user(state: AcquisitionState) -> dict[str, Any]:
    """Interrupt with a question for the decided field; the answer goes to ``observe_user``."""
    profile = get_profile(state["profile"])
    decided: dict[str, Any] = dict(state.get("decision") or {})
    spec = profile.field(decided.get("field") or "")
    question = question_for(state, profile, spec)
    answer = interrupt(question)
    return {"pending_answer": {"field": spec.name, "answer": answer,
                               "attempt": question["attempt"]}}


async def observe_user(state: AcquisitionState) -> dict[str, Any]:
    """Validate the answer: store it, or log why it was rejected (the next question says)."""
    profile = get_profile(state["profile"])
    pending = state.get("pending_answer") or {}
    spec = profile.field(pending.get("field") or "")
    raw = pending.get("answer")
    if isinstance(raw, dict) and len(raw) == 1 and next(iter(raw)) in ("answer", "value"):
        raw = next(iter(raw.values()))  # a form posting {"answer": ...} means the same
    value, reason = check_answer(spec, raw)
    entry = {"iteration": state["iterations"], "field": spec.name, "attempt":
             pending.get("attempt"), "answer": raw if _plain(raw) else str(raw),
             "valid": reason is None, "reason": reason}
    update: dict[str, Any] = {"answers": [entry], "pending_answer": None,
                              "messages": [answer_message(raw)]}
    if reason is None:
        update["values"] = {**state["values"], spec.name: value}
        update["sources"] = {**state["sources"], spec.name: "user"}
    # Seed 000's guard table: once the region/currency retries are used up the run passes
    # on to prepare (the field shows as exhausted); it is not aborted here.
    return update


async def reflect(state: AcquisitionState) -> dict[str, Any]:
    """Note why the plan is stuck; abort when no missing input can still be acquired."""
    profile = get_profile(state["profile"])
    d: dict[str, Any] = dict(state.get("decision") or {})
    target = d.get("field") if profile.has(d.get("field")) else None
    spec = profile.field(target) if target else (profile.derived[0] if profile.derived else None)
    missing = recipes.missing_components(state, spec) if spec else []
    acquirable = [m for m in missing if recipes.recipe(state, profile, profile.field(m))]
    note = {"kind": "reflection", "iteration": state["iterations"],
            "field": spec.name if spec else None, "missing": missing, "acquirable": acquirable,
            "reason": d.get("reason", "")}
    update: dict[str, Any] = {"notes": [note]}
    if missing and not acquirable:
        update["status"] = "aborted"
        update["abort_reason"] = (f"{spec.name if spec else 'the target'} cannot be "
                                  f"calculated: no attempts left for {', '.join(missing)}")
    return update


async def finish(state: AcquisitionState) -> dict[str, Any]:
    """Write the run's ``result``: status, values, the TAM and why the run ended."""
    profile = get_profile(state["profile"])
    values = state["values"]
    missing = recipes.missing_fields(state, profile)
    derived = profile.derived[0].name if profile.derived else None
    if state["status"] == "aborted":
        status = "aborted"
    elif (recipes.calculator_succeeded(state) if derived else not missing):
        status = "complete"
    else:
        status = "incomplete"
    result = {
        "status": status,
        "reason": dict(state.get("decision") or {}).get("reason") or "",
        "goal": state["goal"],
        "profile": profile.name,
        "region": values.get("core.region"),
        "currency": values.get("core.currency"),
        "values": dict(values),
        "sources": dict(state["sources"]),
        "evidence": {n["field"]: {"source": n.get("source"), "title": n.get("title")}
                     for n in state.get("notes") or ()
                     if n.get("kind") == "observation" and n.get("accepted")},
        "tam": values.get(derived) if derived else None,
        "missing": missing,
        "iterations": state["iterations"],
        "decisions": len(state.get("decisions") or ()),
        "graph_version": state.get("graph_version"),
    }
    return {"result": result, "status": "aborted" if status == "aborted" else "done",
            "messages": [result_message(result)]}


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)
