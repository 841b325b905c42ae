"""Read the three plan forms into one shape: WriteHERE XML, WriteHERE JSON, forge-lcdl packs.

Reading is tolerant where the seeds are (code fences, tag and value case, ids given as
numbers, a missing ``<atom>`` or ``depends_on``) and strict where they are (schema
version, start node); structural validation of the DAG lives in :mod:`.dag`.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from planner.decomposition.errors import (
    DuplicateTaskError,
    MissingStartError,
    PlanParseError,
    SchemaVersionError,
)

PlanForm = Literal["writehere_xml", "writehere_json", "lcdl_pack"]
PLAN_FORMS: tuple[str, ...] = ("writehere_xml", "writehere_json", "lcdl_pack")
PACK_NODE_TYPES: tuple[str, ...] = ("kernel", "rank", "invoke_pack", "terminal")
TERMINAL_TASK_ID = "lcdl.terminal"

# WriteHERE's config["tag2task_type"] maps tags to these upper-case names; models echo both.
_TASK_TYPE_ALIASES = {"composition": "write", "reasoning": "think", "retrieval": "search"}
_TRUE = {"true", "yes", "1", "y", "t"}


@dataclass(frozen=True)
class PlannedTask:
    """One task as a plan states it, with ids local to that plan."""

    id: str
    goal: str
    task_type: str
    deps: tuple[str, ...] = ()
    atomic: bool = False
    worker: str | None = None
    input: Mapping[str, Any] = field(default_factory=dict)
    subtasks: tuple[PlannedTask, ...] = ()


@dataclass(frozen=True)
class ParsedPlan:
    """A plan read from model output: its form, tasks, and what the reader had to fix."""

    form: str
    tasks: tuple[PlannedTask, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)
    start: str | None = None
    warnings: tuple[str, ...] = ()


class _JSONObject(dict[str, Any]):
    """A JSON object that remembers keys the text repeated (``json`` keeps only the last)."""

    duplicate_keys: tuple[str, ...] = ()


def _object_pairs(pairs: list[tuple[str, Any]]) -> _JSONObject:
    obj = _JSONObject()
    dups = []
    for key, value in pairs:
        if key in obj:
            dups.append(key)
        obj[key] = value
    obj.duplicate_keys = tuple(dups)
    return obj


def strip_fences(text: str) -> str:
    """Drop a Markdown code fence (```json … ```) around the payload, if any."""
    match = re.search(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", text, re.S)
    return match.group(1).strip() if match else text.strip()


def load_json(text: str) -> Any:
    """Parse JSON text (fenced or not), keeping track of repeated object keys."""
    body = strip_fences(text)
    try:
        return json.loads(body, object_pairs_hook=_object_pairs)
    except json.JSONDecodeError as exc:
        snippet = body[:60].replace("\n", " ")
        raise PlanParseError(
            f"plan is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            f"it starts {snippet!r}"
        ) from None


def detect_form(raw: str | Mapping[str, Any] | list[Any]) -> str:
    """Name the plan form of ``raw`` from its content, not from what was asked for."""
    if isinstance(raw, Mapping):
        return "lcdl_pack" if _looks_like_pack(raw) else "writehere_json"
    if isinstance(raw, list):
        return "writehere_json"
    text = strip_fences(raw)
    if re.search(r"<plan\b|<task\b", text, re.I):
        return "writehere_xml"
    if re.search(r"<result\b", text, re.I):
        return "writehere_json"
    obj = load_json(text)
    if isinstance(obj, Mapping) and _looks_like_pack(obj):
        return "lcdl_pack"
    return "writehere_json"


def _looks_like_pack(obj: Mapping[str, Any]) -> bool:
    return any(key in obj for key in ("draft_pack", "schema_version", "nodes"))


def read_plan(raw: str | Mapping[str, Any] | list[Any]) -> ParsedPlan:
    """Read ``raw`` in whichever of the three forms it is; raise ``PlanParseError``."""
    if not isinstance(raw, (str, Mapping, list)):
        raise PlanParseError(f"plan must be text or JSON, got {type(raw).__name__}")
    if isinstance(raw, str) and not raw.strip():
        raise PlanParseError("plan is empty; expected <plan>…</plan>, <result>…</result> or a pack")
    form = detect_form(raw)
    if form == "writehere_xml":
        return read_xml_plan(str(raw))
    if form == "lcdl_pack":
        return read_decision_pack(raw if isinstance(raw, Mapping) else load_json(str(raw)))
    return read_json_plan(raw)


# --- WriteHERE XML -------------------------------------------------------------------------

_TASK_BLOCK = re.compile(r"<task\b[^>]*>(.*?)</task\s*>", re.I | re.S)


def _xml_tag(block: str, name: str) -> str | None:
    match = re.search(rf"<{name}\b[^>]*?(?:/>|>(.*?)</{name}\s*>)", block, re.I | re.S)
    if match is None:
        return None
    return html.unescape((match.group(1) or "").strip())


def _split_ids(value: Any) -> tuple[str, ...]:
    """Dependency ids from ``"1, 2"``, ``[1, "2"]``, ``3`` or nothing."""
    if value is None or value == "":
        return ()
    if isinstance(value, Mapping):
        raise PlanParseError(f"dependencies must be a list of ids or '1,2', got {value!r:.40}")
    if isinstance(value, (list, tuple)):
        items = [str(v).strip() for v in value]
    else:
        items = re.split(r"[,;\s]+", str(value))
    return tuple(i for i in (s.strip() for s in items) if i)


def _task_type(value: Any, where: str) -> str:
    if value is None or not str(value).strip():
        raise PlanParseError(f"{where} has no task_type; use one such as search, think, write")
    name = str(value).strip().lower()
    return _TASK_TYPE_ALIASES.get(name, name)


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in _TRUE


def read_xml_plan(text: str) -> ParsedPlan:
    """Read WriteHERE's ``<plan><task><id/><goal/><task_type/><dependency/><atom/></task>``."""
    body = re.sub(r"<!--.*?-->", "", strip_fences(text), flags=re.S)
    tasks = []
    for n, block in enumerate(_TASK_BLOCK.findall(body), start=1):
        where = f"<task> #{n}"
        task_id = _xml_tag(block, "id")
        if not task_id:
            raise PlanParseError(f"{where} has no <id>; give every task an id")
        goal = _xml_tag(block, "goal")
        if not goal:
            raise PlanParseError(f"task {task_id!r} has no <goal>; say what the task must do")
        atom = _xml_tag(block, "atom")
        task_type = _task_type(_xml_tag(block, "task_type"), f"task {task_id!r}")
        tasks.append(
            PlannedTask(
                id=task_id,
                goal=goal,
                task_type=task_type,
                deps=_split_ids(_xml_tag(block, "dependency")),
                # WriteHERE: a task without <atom> is planned again, not executed.
                atomic=_flag(atom) if atom is not None else False,
                worker=task_type,
            )
        )
    if not tasks and not re.search(r"<plan\b", body, re.I):
        raise PlanParseError("no <task> elements found; expected <plan><task>…</task></plan>")
    return ParsedPlan(form="writehere_xml", tasks=tuple(tasks))


# --- WriteHERE JSON ------------------------------------------------------------------------


def read_json_plan(raw: str | Mapping[str, Any] | list[Any]) -> ParsedPlan:
    """Read WriteHERE's JSON form: ``<result>{…"sub_tasks": […]}</result>``, nested."""
    obj: Any = raw
    if isinstance(raw, str):
        match = re.search(r"<result\b[^>]*>(.*?)</result\s*>", raw, re.I | re.S)
        obj = load_json(match.group(1) if match else raw)
    if isinstance(obj, Mapping):
        items = obj.get("sub_tasks", obj.get("tasks"))
        if items is None:
            raise PlanParseError(
                "JSON plan has no 'sub_tasks' list; expected {\"sub_tasks\": [{\"id\": …}]}"
            )
    else:
        items = obj
    return ParsedPlan(form="writehere_json", tasks=_json_tasks(items, "plan"))


def _json_tasks(items: Any, where: str) -> tuple[PlannedTask, ...]:
    if not isinstance(items, list):
        raise PlanParseError(f"'sub_tasks' of {where} must be a list, got {type(items).__name__}")
    tasks = []
    for n, item in enumerate(items, start=1):
        if not isinstance(item, Mapping):
            raise PlanParseError(f"task #{n} of {where} must be an object, got {item!r:.40}")
        if item.get("id") in (None, ""):
            raise PlanParseError(f"task #{n} of {where} has no 'id'; give every task an id")
        task_id = str(item["id"]).strip()
        goal = str(item.get("goal") or "").strip()
        if not goal:
            raise PlanParseError(f"task {task_id!r} has no 'goal'; say what the task must do")
        task_type = _task_type(item.get("task_type", item.get("type")), f"task {task_id!r}")
        children = _json_tasks(item["sub_tasks"], f"task {task_id!r}") if item.get(
            "sub_tasks"
        ) else ()
        # A task with planned children is never atomic; otherwise honour "atom", and a
        # leaf that does not say counts as atomic (WriteHERE's JSON form plans the tree).
        atomic = False if children else _flag(item["atom"]) if "atom" in item else True
        inputs = item.get("input", item.get("inputs")) or {}
        if not isinstance(inputs, Mapping):
            raise PlanParseError(f"'input' of task {task_id!r} must be an object")
        tasks.append(
            PlannedTask(
                id=task_id,
                goal=goal,
                task_type=task_type,
                deps=_split_ids(item.get("dependency", item.get("depends_on"))),
                atomic=atomic,
                worker=task_type,
                input=dict(inputs),
                subtasks=children,
            )
        )
    return tuple(tasks)


# --- forge-lcdl decision pack --------------------------------------------------------------


def read_decision_pack(obj: Any) -> ParsedPlan:
    """Read a forge-lcdl ``schema_version`` 2 pack, raw or wrapped in ``{"draft_pack": …}``."""
    if isinstance(obj, Mapping) and "draft_pack" in obj:
        obj = obj["draft_pack"]
    if not isinstance(obj, Mapping):
        raise PlanParseError(f"decision pack must be a JSON object, got {type(obj).__name__}")
    version = obj.get("schema_version")
    try:
        ok = int(str(version).strip()) == 2
    except ValueError:
        ok = False
    if not ok:
        raise SchemaVersionError(
            f"unsupported schema_version {version!r}; decision packs must say schema_version 2"
        )
    nodes = obj.get("nodes")
    if not isinstance(nodes, Mapping) or not nodes:
        raise PlanParseError("decision pack has no 'nodes' object; expected {node id: node}")
    dups = getattr(nodes, "duplicate_keys", ())
    if dups:
        raise DuplicateTaskError(
            f"duplicate node id {dups[0]!r} in decision pack; every node needs its own id"
        )
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise PlanParseError("decision pack 'metadata' must be an object")
    start = obj.get("start")
    known = ", ".join(str(k) for k in nodes)
    if start in (None, ""):
        raise MissingStartError(f"decision pack has no 'start' node; set it to one of: {known}")
    if str(start) not in {str(k) for k in nodes}:
        raise MissingStartError(f"start node {start!r} is not in the pack; nodes: {known}")
    default_task_id = metadata.get("default_task_id")
    tasks = tuple(
        _pack_node(str(node_id), node, default_task_id) for node_id, node in nodes.items()
    )
    return ParsedPlan(
        form="lcdl_pack",
        tasks=tasks,
        metadata=dict(metadata),
        start=str(start),
    )


def _pack_node(node_id: str, node: Any, default_task_id: Any) -> PlannedTask:
    if not isinstance(node, Mapping):
        raise PlanParseError(f"node {node_id!r} must be an object, got {node!r:.40}")
    node_type = str(node.get("type") or "kernel").strip().lower()
    if node_type not in PACK_NODE_TYPES:
        raise PlanParseError(
            f"node {node_id!r} has type {node.get('type')!r}; "
            f"must be one of: {', '.join(PACK_NODE_TYPES)}"
        )
    for key in ("input", "static_payload"):
        if not isinstance(node.get(key) or {}, Mapping):
            raise PlanParseError(f"'{key}' of node {node_id!r} must be an object")
    merged = {**(node.get("input") or {}), **(node.get("static_payload") or {})}
    if node_type == "terminal":
        worker: str | None = TERMINAL_TASK_ID
    elif node_type == "invoke_pack":
        worker = node.get("task_id") or None
    else:
        worker = node.get("task_id") or default_task_id or node_type
    goal = node.get("goal") or next(
        (merged[k] for k in ("goal", "question", "query", "text") if merged.get(k)),
        f"{node_type} node {node_id}",
    )
    return PlannedTask(
        id=node_id,
        goal=str(goal),
        task_type=node_type,
        deps=_split_ids(node.get("depends_on")),
        atomic=node_type != "invoke_pack",  # invoke_pack runs a further pack: plan it
        worker=str(worker) if worker else None,
        input=merged,
    )
