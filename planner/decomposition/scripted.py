"""Scripted (offline, deterministic) answers for the decomposition planner's LLM calls.

One abstract plan per planned task is rendered in whichever form the run asks for, so the
same run can be watched as WriteHERE XML, WriteHERE JSON or a forge-lcdl decision pack.
The default plan has about ten tasks over three rounds; ``breadth`` >= 5 splits every
section again (breadth 14 gives about 200 tasks).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from planner.llm import scripted_responder

TOPICS = (
    "costs and savings", "who it serves", "how it works", "options compared",
    "rules and permits", "operations", "equity and access", "financing", "incentives",
    "risks", "timeline", "case studies", "public engagement", "metrics",
    "alternatives", "procurement",
)
"""Section topics that fit any goal (the goal itself is named in each section's task)."""
AUDIENCE_CHOICES = ["council members", "residents", "investors"]
LARGE_BREADTH = 5


def _task(tid: str, goal: str, task_type: str, deps: Sequence[str] = (), *, atomic: bool = True,
          inputs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"id": tid, "goal": goal, "task_type": task_type, "deps": list(deps),
            "atomic": atomic, "input": dict(inputs or {}), "sub_tasks": []}


def _root_plan(ctx: Mapping[str, Any]) -> list[dict[str, Any]]:
    goal = str(ctx.get("goal") or "the goal")
    settings = ctx.get("settings") or {}
    draft_deps = ["1", "2"]
    summary_deps = ["3"]
    tasks = [
        _task("1", f"Gather background on: {goal}", "search", inputs={"query": goal}),
        _task("2", f"Outline the key points of: {goal}", "think"),
    ]
    if settings.get("ask_clarifications"):
        tasks.append(_task("5", "Who is the audience of the briefing?", "clarify",
                           inputs={"question": "Who is the audience of the briefing?",
                                   "choices": AUDIENCE_CHOICES}))
        tasks.append(_task("6", "What tone should the briefing take?", "clarify",
                           inputs={"question": "What tone should the briefing take?"}))
        draft_deps += ["5", "6"]
    failure = settings.get("inject_failure") or "none"
    if failure in ("worker_error", "flaky"):
        suffix = " (flaky)" if failure == "flaky" else ""
        tasks.append(_task("7", f"Fetch usage figures from the unreachable archive{suffix}",
                           "unreliable"))
        summary_deps.append("7")
    elif failure == "optional_error":
        tasks.append(_task("7", "Fetch optional usage figures from the unreachable archive",
                           "unreliable"))
        summary_deps.append("7")
    elif failure == "uncertain":
        tasks.append(_task("7", "Estimate local demand from anecdotal reports", "think"))
        summary_deps.append("7")
    elif failure == "unknown_worker":
        tasks.append(_task("7", "Translate the key points into Esperanto", "translate"))
        summary_deps.append("7")
    tasks.append(_task("3", f"Draft the body of: {goal}", "write", draft_deps, atomic=False))
    tasks.append(_task("4", f"Write the closing summary of: {goal}", "write", summary_deps,
                       inputs={"outline": {"from_sub_goal": "2", "slot": "text"}}))
    return tasks


def _sections(ctx: Mapping[str, Any]) -> list[dict[str, Any]]:
    breadth = int((ctx.get("settings") or {}).get("breadth") or 2)
    about = str(ctx.get("goal") or "").partition(": ")[2]  # "Draft the body of: <goal>"
    return [
        _task(str(k), f"Section {k}: {TOPICS[(k - 1) % len(TOPICS)]}"
              + (f" ({about[:60]})" if about else ""), "write",
              atomic=breadth < LARGE_BREADTH)
        for k in range(1, breadth + 1)
    ]


def _paragraphs(ctx: Mapping[str, Any]) -> list[dict[str, Any]]:
    breadth = int((ctx.get("settings") or {}).get("breadth") or 2)
    section = str(ctx.get("goal"))
    # A binary tree of dependencies keeps the round count logarithmic in breadth.
    return [
        _task(str(k), f"Paragraph {k} of {section}", "write", [str(k // 2)] if k > 1 else [])
        for k in range(1, breadth + 1)
    ]


def abstract_plan(ctx: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The scripted plan for the task in ``ctx`` (empty: execute it as it is)."""
    goal = str(ctx.get("goal") or "")
    if ctx.get("task_id") == "root":
        return _root_plan(ctx)
    if goal.startswith("Draft the body"):
        return _sections(ctx)
    if goal.startswith("Section "):
        return _paragraphs(ctx)
    return []


def to_xml(tasks: Sequence[Mapping[str, Any]]) -> str:
    """Render tasks as WriteHERE's ``<plan>`` XML."""
    rows = [
        "  <task>\n"
        f"    <id>{escape(t['id'])}</id>\n"
        f"    <goal>{escape(t['goal'])}</goal>\n"
        f"    <task_type>{escape(t['task_type'])}</task_type>\n"
        f"    <dependency>{','.join(t['deps'])}</dependency>\n"
        f"    <atom>{str(t['atomic']).lower()}</atom>\n"
        "  </task>"
        for t in tasks
    ]
    return "<plan>\n" + "\n".join(rows) + "\n</plan>"


def _json_task(t: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"id": t["id"], "task_type": t["task_type"], "goal": t["goal"],
                           "dependency": t["deps"], "atom": t["atomic"]}
    if t["input"]:
        out["input"] = t["input"]
    if t["sub_tasks"]:
        out.pop("atom")
        out["sub_tasks"] = [_json_task(s) for s in t["sub_tasks"]]
    return out


def to_json(tasks: Sequence[Mapping[str, Any]], goal: str) -> str:
    """Render tasks as WriteHERE's JSON form inside ``<result>`` (nested ``sub_tasks``)."""
    body = {"id": "", "goal": goal, "dependency": [], "sub_tasks": [_json_task(t) for t in tasks]}
    return "<result>\n" + json.dumps(body, indent=1) + "\n</result>"


def to_pack(tasks: Sequence[Mapping[str, Any]], goal: str, *, wrap: bool) -> str:
    """Render tasks as a forge-lcdl schema_version 2 decision pack (with a terminal node)."""
    nodes: dict[str, Any] = {}
    for t in tasks:
        node: dict[str, Any] = {
            "type": "kernel" if t["atomic"] else "invoke_pack",
            "input": {"goal": t["goal"], **t["input"]},
            "depends_on": t["deps"],
        }
        if t["atomic"] and t["task_type"] != "think":  # "think" comes from default_task_id
            node["task_id"] = t["task_type"]
        nodes[t["id"]] = node
    sinks = [t["id"] for t in tasks if not any(t["id"] in o["deps"] for o in tasks)]
    nodes["done"] = {"type": "terminal", "depends_on": sinks,
                     "static_payload": {"done": True, "goal": goal}}
    pack = {"schema_version": 2, "pack_id": "planwatch-scripted",
            "start": tasks[0]["id"], "nodes": nodes,
            "metadata": {"title": goal, "default_task_id": "think"}}
    return json.dumps({"draft_pack": pack} if wrap else pack, indent=1)


@scripted_responder("decomposition.plan")
def scripted_plan(ctx: Mapping[str, Any]) -> str:
    """Answer a planning call in the form the run asked for."""
    tasks = abstract_plan(ctx)
    form = ctx.get("form") or "writehere_xml"
    goal = str(ctx.get("goal") or "")
    if form == "writehere_json":
        draft = next((t for t in tasks if t["goal"].startswith("Draft the body")), None)
        if draft is not None:  # plan the draft's sections in the same answer (nested form)
            draft["sub_tasks"] = _sections(ctx)
        return to_json(tasks, goal)
    if not tasks:
        return "<plan></plan>"  # WriteHERE: an empty plan means "execute it as it is"
    if form == "lcdl_pack":
        return to_pack(tasks, goal, wrap=ctx.get("task_id") == "root")
    return to_xml(tasks)


@scripted_responder("decomposition.retry")
def scripted_retry(ctx: Mapping[str, Any]) -> dict[str, Any]:
    """Retry a failed task with a new sub-goal when a different source could help."""
    goal = str(ctx.get("goal") or "")
    if "(flaky)" in goal:
        return {"retry": True, "goal": "Fetch usage figures from the public data portal",
                "reasoning": "the archive is down; the public portal has the same figures"}
    if "unreachable" in goal:
        return {"retry": True, "goal": f"{goal} (second try)",
                "reasoning": "try the archive once more"}
    error = str(ctx.get("error") or "")
    if "found nothing" in error and "(broader search)" not in goal:
        return {"retry": True, "goal": f"{goal} (broader search)",
                "reasoning": "the search found nothing; look more broadly"}
    if "uncertain" in error and "anecdotal" in goal:
        return {"retry": True, "goal": goal.replace("anecdotal reports", "published figures"),
                "reasoning": "the estimate was unsure; base it on published figures"}
    return {"retry": False, "goal": None, "reasoning": "nothing else to try"}


@scripted_responder("decomposition.accept")
def scripted_accept(ctx: Mapping[str, Any]) -> dict[str, Any]:
    """Accept going on without an optional task or a background search that found nothing."""
    goal, error = str(ctx.get("goal") or ""), str(ctx.get("error") or "")
    if "optional" in goal.lower():
        return {"accept": True, "reasoning": "the task was optional; the rest still answers"}
    if "found nothing" in error:
        return {"accept": True, "reasoning": "the draft can be written without background"}
    return {"accept": False, "reasoning": "the run needs this task's result"}


GROUNDWORK = ("search", "think", "clarify")
"""Workers whose output feeds other tasks rather than the reader."""


@scripted_responder("decomposition.done")
def scripted_done(ctx: Mapping[str, Any]) -> dict[str, Any]:
    """Name the text of the root's deliverables (not its groundwork) for the synthesis."""
    outputs = [o for o in ctx.get("outputs") or []
               if o["parent"] == "root" and "text" in o["slots"]]
    chosen = [o for o in outputs if (o["worker"] or o["task_type"]) not in GROUNDWORK] or outputs
    return {"synthesis_inputs": {f"part_{o['id']}": {"from_sub_goal": o["id"], "slot": "text"}
                                 for o in chosen},
            "reasoning": "the written parts are the deliverable; the rest was groundwork"}


def _with_sources(ctx: Mapping[str, Any], text: str) -> str:
    deps = {k: v for k, v in (ctx.get("dependencies") or {}).items() if v}
    if not deps:
        return text
    used = "; ".join(f"{k}: {str(v)[:60]}" for k, v in sorted(deps.items()))
    return f"{text} (building on {used})"


@scripted_responder("decomposition.think")
def scripted_think(ctx: Mapping[str, Any]) -> str:
    """A short line of reasoning about the task."""
    goal = str(ctx.get("goal") or "")
    if "anecdotal" in goal:  # hedged: the planner reads this tone and may redo the task
        return f"I am not sure about '{goal}': the reports are anecdotal and unverified."
    return _with_sources(ctx, f"Key points for '{goal}': who needs it, what it costs, "
                              "what to do next.")


@scripted_responder("decomposition.write")
def scripted_write(ctx: Mapping[str, Any]) -> str:
    """A short paragraph for the task."""
    return _with_sources(ctx, f"{ctx.get('goal')}: a short, plain-language paragraph.")


@scripted_responder("decomposition.gate")
def scripted_gate(ctx: Mapping[str, Any]) -> dict[str, Any]:
    """forge-lcdl boolean gate: always feasible."""
    return {"answer": True, "reason": "feasible with the facts given"}


@scripted_responder("decomposition.route")
def scripted_route(ctx: Mapping[str, Any]) -> dict[str, Any]:
    """forge-lcdl enum route: the first label."""
    labels = (ctx.get("inputs") or {}).get("labels") or ["default"]
    return {"label": str(labels[0])}


@scripted_responder("decomposition.synthesize")
def scripted_synthesize(ctx: Mapping[str, Any]) -> str:
    """Join the finished tasks' results into the run's closing text."""
    lines = [f"Synthesis for: {ctx.get('goal')} (status {ctx.get('status')})"]
    for item in ctx.get("results") or []:
        lines.append(f"- [{item['id']}] {str(item['text'])[:120]}")
    return "\n".join(lines)
