"""The deterministic decision rules: ``select`` (before the LLM) and ``decision_policy``.

Both are pure functions of state and profile, so every rule can be tested on its own and
every rewrite can be explained: a policy rule returns the rewritten decision together with
its name and a human reason, which ``decision_policy`` stores as provenance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from planner.acquisition import recipes
from planner.acquisition.profile import Profile
from planner.acquisition.state import Decision, brief, decision

SelectResult = tuple[Decision, str] | tuple[None, None]


def select_decision(state: Mapping[str, Any], profile: Profile) -> SelectResult:
    """A deterministic decision and the name of the rule that made it, or (None, None).

    First match wins, in the order seed 001 keeps from the original planner.
    """
    has_calculator = bool(profile.derived)
    if has_calculator and recipes.calculator_capped(state, profile):
        return decision("finish", reason=f"the calculator ran {state.get('calc_runs')} times, "
                        f"its cap of {profile.calc_cap}"), "calculator_cap_exhausted"
    if has_calculator and recipes.calculator_succeeded(state):
        target = (state.get("calculation") or {}).get("target")
        return decision("finish", target,
                        reason=f"{target} was calculated from the current inputs"), \
            "calculator_succeeded"
    tasks = recipes.acquisition_tasks(state, profile)
    if has_calculator and recipes.calculator_blocked(state):
        blocked_on = set((state.get("calculation") or {}).get("missing") or ())
        for task in tasks:
            if task["field"] in blocked_on:
                reason = f"the calculator is blocked on {task['field']}; " + task["reason"]
                rewritten: Decision = {**task, "reason": reason}
                return rewritten, "calculator_blocked"
    if not recipes.missing_fields(state, profile) and not tasks:
        return decision("finish", reason="every input has a value and no task is open"), \
            "nothing_missing"
    if tasks:
        return tasks[0], "acquisition_task"
    return None, None


Rule = Callable[[Mapping[str, Any], Profile, Decision, dict[str, list[str]]], tuple[Decision, str]
                | None]


def _derived_target(state: Mapping[str, Any], profile: Profile, d: Decision,
                    decomps: dict[str, list[str]]) -> tuple[Decision, str] | None:
    """A derived field cannot be searched or asked: acquire its components instead."""
    field = d["field"]
    if d["action"] not in ("search", "ask_user") or not profile.has(field):
        return None
    spec = profile.field(field)
    if spec.strategy != "derived":
        return None
    decomps.setdefault(field, list(spec.components))
    view = {**state, "dynamic_decompositions": decomps}
    for task in recipes.acquisition_tasks(view, profile):
        if task["field"] in spec.components:
            return task, (
                f"{field} is derived from {', '.join(spec.components)}; "
                f"acquiring {task['field']} first")
    return decision("reflect", field, reason=f"no input of {field} can still be acquired"), (
        f"{field} is derived and none of its missing inputs can still be acquired")


def _web_search_first(state: Mapping[str, Any], profile: Profile, d: Decision,
                      decomps: dict[str, list[str]]) -> tuple[Decision, str] | None:
    """Do not ask the user for a web-preferred field before searching for it."""
    field = d["field"]
    if d["action"] != "ask_user" or not profile.has(field):
        return None
    spec = profile.field(field)
    if spec.strategy != "web" or recipes.search_count(state, field) > 0:
        return None
    step = recipes.recipe(state, profile, spec)
    if step is None or step.action != "search":
        return None
    return decision("search", field, step.query, f"search for {field} before asking"), (
        f"{field} is web-preferred and has not been searched yet")


def _fill_query(state: Mapping[str, Any], profile: Profile, d: Decision,
                decomps: dict[str, list[str]]) -> tuple[Decision, str] | None:
    """A search without a query gets the field's next query template."""
    if d["action"] != "search" or (d["query"] or "").strip() or not profile.has(d["field"]):
        return None
    spec = profile.field(d["field"])
    index = min(recipes.search_count(state, spec.name), max(len(spec.queries) - 1, 0))
    query = recipes.fill(spec.queries[index], state) if spec.queries else \
        recipes.fill(f"{spec.label} {{region}}", state)
    return {**d, "query": query}, "the search had no query; using the field's query template"


def _search_cap(state: Mapping[str, Any], profile: Profile, d: Decision,
                decomps: dict[str, list[str]]) -> tuple[Decision, str] | None:
    """After ``search_cap`` searches for a field, ask the user for it instead."""
    if d["action"] != "search":
        return None
    count = recipes.search_count(state, d["field"] or "")
    if count < profile.search_cap:
        return None
    return decision("ask_user", d["field"], reason="searching did not find it"), (
        f"{d['field']} was searched {count} times, the cap of {profile.search_cap}")


def _duplicate_query(state: Mapping[str, Any], profile: Profile, d: Decision,
                     decomps: dict[str, list[str]]) -> tuple[Decision, str] | None:
    """Never run the same query twice: ask the user instead."""
    if d["action"] != "search":
        return None
    if recipes.normalize_query(d["query"] or "") not in recipes.queries_run(state):
        return None
    return decision("ask_user", d["field"], reason="the query was already run"), (
        f"the query {d['query']!r} was already searched")


def _ask_cap(state: Mapping[str, Any], profile: Profile, d: Decision,
             decomps: dict[str, list[str]]) -> tuple[Decision, str] | None:
    """After ``ask_cap`` answers for a field, stop asking and finish."""
    if d["action"] != "ask_user":
        return None
    count = recipes.ask_count(state, d["field"] or "")
    if count < profile.ask_cap:
        return None
    return decision("finish", reason=f"{d['field']} could not be acquired"), (
        f"{d['field']} was asked {count} times, the cap of {profile.ask_cap}")


def _finish_needs_calculation(state: Mapping[str, Any], profile: Profile, d: Decision,
                              decomps: dict[str, list[str]]) -> tuple[Decision, str] | None:
    """Finishing before the calculator succeeded: calculate, or reflect when it is blocked."""
    if d["action"] != "finish" or not profile.derived or recipes.calculator_succeeded(state):
        return None
    if recipes.calculator_capped(state, profile):
        return None
    target = profile.derived[0].name
    if recipes.calculator_blocked(state):
        missing = ", ".join((state.get("calculation") or {}).get("missing") or ())
        return decision("reflect", target, reason="the calculator is blocked"), (
            f"the calculator is still blocked on {missing}")
    return decision("calculate", target, reason=f"calculate {target} before finishing"), (
        f"{target} has not been calculated from the current inputs")


POLICY_RULES: tuple[tuple[str, Rule], ...] = (
    ("derived_target", _derived_target),
    ("web_search_first", _web_search_first),
    ("fill_query", _fill_query),
    ("search_cap", _search_cap),
    ("duplicate_query", _duplicate_query),
    ("ask_cap", _ask_cap),
    ("finish_needs_calculation", _finish_needs_calculation),
)
"""The rewrite rules in the order ``decision_policy`` applies them to one decision."""


def apply_policy(state: Mapping[str, Any], profile: Profile, raw: Decision, origin: str
                 ) -> tuple[Decision, list[dict[str, Any]], dict[str, list[str]]]:
    """Apply the rules to ``raw``: (final decision, rule records, decompositions).

    An ``llm_error`` decision passes through untouched: the model failed, and rewriting
    its fallback ``finish`` into more work would loop on a broken model.
    """
    decomps = {k: list(v) for k, v in (state.get("dynamic_decompositions") or {}).items()}
    if origin == "llm_error":
        return raw, [], decomps
    current, records = raw, []
    for name, rule in POLICY_RULES:
        rewritten = rule(state, profile, current, decomps)
        if rewritten is None:
            continue
        after, reason = rewritten
        records.append({"name": name, "reason": reason, "before": brief(current),
                        "after": brief(after)})
        current = after
    return current, records, decomps
