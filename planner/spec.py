"""What a graph declares to its host: its start input, its task DAG, its questions, its look.

A graph package builds one :class:`GraphSpec` and names it ``SPEC``; the registry
(:mod:`planner.registry`) loads the modules a host lists. Nothing here imports a graph.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from langgraph.graph import StateGraph

from planner.llm import make_llm
from planner.presentation import ResultCard, default_output, generic_result_card
from planner.questions import Checked, QuestionKind, fmt
from planner.search import default_search
from planner.steering import ModelSettings, PromptTemplate, clean_model_settings

FieldKind = Literal["text", "textarea", "number", "integer", "choice", "boolean", "json"]


class InputError(ValueError):
    """Raised when a graph's start input is invalid (:func:`clean_inputs`, ``make_input``).

    ``errors`` maps a field name (or ``"__all__"``) to a message naming the problem.
    """

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


TEXT_LIMIT = 4000
"""Characters a text field takes unless it says otherwise (a goal, say)."""

_TRUE, _FALSE = {"true", "on", "1", "yes"}, {"false", "off", "0", "no", ""}


@dataclass(frozen=True)
class InputField:
    """One field of a graph's start form, and the one rule that cleans its value.

    The start form, the REST API, LangGraph's server API and the graph's ``make_input``
    all clean input through :meth:`clean` (via :func:`clean_inputs`).
    """

    name: str
    label: str
    kind: FieldKind = "text"
    required: bool = True
    default: Any = None
    help: str = ""
    choices: tuple[str, ...] = ()
    min_value: float | None = None
    max_value: float | None = None
    max_length: int = TEXT_LIMIT
    """Text and textarea fields: the most characters taken."""
    check: Callable[[Any], Checked] | None = None
    """A graph's own rule after the kind's (a known region, an ISO currency …)."""

    def clean(self, value: Any) -> Any:
        """The value as the graph takes it; ``ValueError`` naming the problem and the fix.

        A missing value takes the default (an error if the field is required and has
        none); so does a blank one, except in a required text field (an error).
        """
        blank = isinstance(value, str) and not value.strip() and self.kind != "boolean"
        if blank and self.required and self.kind in ("text", "textarea"):
            raise ValueError(f"the {self.label.lower()} is empty; write one, or leave the "
                             "field out to take the default")
        if value is None or blank:
            if self.required and self.default in (None, ""):
                raise ValueError(f"the {self.label.lower()} is required")
            return self.default
        cleaned = self._typed(value)
        if self.check is not None and cleaned not in (None, ""):
            checked, reason = self.check(cleaned)
            if reason is not None:
                raise ValueError(reason)
            cleaned = checked
        return cleaned

    def _typed(self, value: Any) -> Any:
        if self.kind == "boolean":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE | _FALSE:
                return text in _TRUE
            raise ValueError(f"{value!r} is not a yes/no value; use true or false")
        if self.kind in ("integer", "number"):
            return self._number(value)
        if self.kind == "choice" and self.check is None:  # a check knows other spellings
            text = str(value).strip()
            match = next((c for c in self.choices if c.casefold() == text.casefold()), None)
            if match is None:
                raise ValueError(f"{text!r} is not one of: {', '.join(self.choices)}")
            return match
        if self.kind == "json":
            return value
        text = str(value).strip()
        if len(text) > self.max_length:
            raise ValueError(f"the {self.label.lower()} is {len(text):,} characters long; keep "
                             f"it to {self.max_length:,}")
        return text

    def _number(self, value: Any) -> int | float:
        whole = self.kind == "integer"
        kind = "a whole number" if whole else "a number"
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not {kind}")
        try:
            number = float(str(value).strip()) if isinstance(value, str) else float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{value!r} is not {kind}") from None
        if not math.isfinite(number) or (whole and not number.is_integer()):
            raise ValueError(f"{value!r} is not {kind}")
        low, high = self.min_value, self.max_value
        if (low is not None and number < low) or (high is not None and number > high):
            raise ValueError(f"{value} is out of range; use {fmt(low)} to {fmt(high)}")
        if whole and not -WHOLE_MAX <= number <= WHOLE_MAX:
            raise ValueError(f"{value} is out of range; a whole number here is at most "
                             f"{WHOLE_MAX:,} either way (a run's checkpoints hold 64 bits)")
        return int(number) if whole else number


def clean_inputs(fields: Sequence[InputField], values: Mapping[str, Any]) -> dict[str, Any]:
    """Every field cleaned (defaults for missing ones); ``InputError`` names every problem.

    Keys that are not fields are refused, the same way for every graph.
    """
    errors: dict[str, str] = {}
    names = [f.name for f in fields]
    unknown = sorted(set(values) - set(names), key=str)
    if unknown:
        errors["__all__"] = (f"unknown input field(s) {', '.join(map(repr, unknown))}; "
                             f"accepted fields: {', '.join(names) or '(none)'}")
    cleaned: dict[str, Any] = {}
    for spec in fields:
        try:
            cleaned[spec.name] = spec.clean(values.get(spec.name))
        except ValueError as exc:
            errors[spec.name] = str(exc)
    if errors:
        raise InputError(errors)
    return cleaned


_JSON_TYPES = {"text": "string", "textarea": "string", "choice": "string",
               "number": "number", "integer": "integer", "boolean": "boolean"}


def fields_json_schema(title: str, fields: Sequence[InputField]) -> dict[str, Any]:
    """The JSON Schema of what :func:`clean_inputs` takes for ``fields``."""
    properties: dict[str, Any] = {}
    for spec in fields:
        prop: dict[str, Any] = {"title": spec.label}
        if spec.kind in _JSON_TYPES:
            prop["type"] = _JSON_TYPES[spec.kind]
        if spec.help:
            prop["description"] = spec.help
        if spec.default not in (None, ""):
            prop["default"] = spec.default
        if spec.choices:
            prop["enum"] = list(spec.choices)
        if spec.kind in ("text", "textarea"):
            prop["maxLength"] = spec.max_length
        if spec.min_value is not None:
            prop["minimum"] = spec.min_value
        if spec.max_value is not None:
            prop["maximum"] = spec.max_value
        properties[spec.name] = prop
    required = [s.name for s in fields if s.required and s.default in (None, "")]
    return {"title": title, "type": "object", "properties": properties,
            "required": required, "additionalProperties": False}


TaskMerge = Callable[[Any, Any], dict[str, dict[str, Any]]]
"""A graph's own reducer for its task channel: ``merge(current, patch) -> tasks``."""


@dataclass(frozen=True)
class TaskView:
    """A graph's task DAG as the pages show it: where its tasks live and how they merge.

    Each task is a dict with at least ``status``; ``parent``, ``deps``, ``goal``,
    ``task_type``, ``worker``, ``attempts``, ``result`` and ``error`` are shown when present.
    """

    channel: str
    """The state channel holding ``{task_id: task}``."""
    merge: TaskMerge
    """The graph's reducer of that channel, applied to each update the run records."""
    statuses: tuple[str, ...]
    """Every status a task can have, in the order the legend lists them."""
    running: str = "running"
    """The status of a task in flight (shown as waiting while the run waits for an answer)."""
    not_started: tuple[str, ...] = ("pending",)
    """Statuses of tasks that have not run (shown as cancelled once the run stopped)."""
    failed: tuple[str, ...] = ("err", "failed")
    """Statuses of tasks that failed (the node execution that says so is marked failed)."""
    leads: bool = False
    """Shown first on the run page, above the waterfall and the graph picture (the plan is
    what a reader of this graph's runs comes for); else beside the graph, below it."""


def last_human_text(messages: Any) -> str:
    """The text of the last human message of a chat client's list ("" if none): a message
    is ``{"type": "human"}`` or ``{"role": "user"}``, its content text or text parts."""
    items = messages if isinstance(messages, list) else []
    for message in reversed(items):
        if not isinstance(message, Mapping):
            continue
        if message.get("type") not in ("human", "user") and message.get("role") not in (
                "user", "human"):
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content
                               if isinstance(part, Mapping) and part.get("type") == "text")
        return str(content or "").strip()
    return ""


GROUP_NAME_MAX = 150
"""The longest group name taken (Django's ``Group.name``)."""


def answer_groups(declared: Mapping[str, tuple[str, ...]], question: Any
                  ) -> tuple[str, ...]:
    """The groups that answer ``question``: those its value names (``"groups": [...]``,
    how a ``langgraph.json`` graph's ``interrupt()`` says it), else those ``declared`` for
    its ``field``, its ``kind`` or ``"*"``; ``()`` for anyone."""
    if isinstance(question, Mapping):
        own = question.get("groups")
        if isinstance(own, str):
            own = [own]
        if isinstance(own, list | tuple):
            names = [str(g).strip()[:GROUP_NAME_MAX] for g in own if str(g).strip()]
            if names:
                return tuple(dict.fromkeys(names))
        for key in (question.get("field"), question.get("kind")):
            if isinstance(key, str) and key in declared:
                return tuple(declared[key])
    return tuple(declared.get("*", ()))


WHOLE_MAX = 2**63 - 1024
"""The largest whole number an ``integer`` input field takes (either sign): the largest
float below 2**63, so its integer fits the 64 bits a checkpoint (msgpack) holds."""

DEADLINE_SECONDS_MAX = 315_576_000
"""The longest a deadline, its reminder or its escalation may be, in seconds: ten years
(a datetime ends at 9999: 1e18 seconds overflowed and wedged the run asking)."""

DEADLINE_OUTCOMES = ("answer", "cancel")
"""What happens when a question's deadline passes unanswered: its default answer is applied
("answered by the deadline"), or its run is cancelled with the reason."""


@dataclass(frozen=True)
class QuestionDeadline:
    """How long a question may wait, and what happens as it waits: a reminder
    ``remind_before`` seconds before the deadline, an escalation to the ``escalate_to``
    groups at it (who then have ``escalate_for`` more seconds), and then ``on_expiry``:
    ``"answer"`` applies ``default``, ``"cancel"`` cancels the run."""

    seconds: float
    on_expiry: str = "cancel"
    default: Any = None
    remind_before: float = 0.0
    escalate_to: tuple[str, ...] = ()
    escalate_for: float = 0.0

    def __post_init__(self) -> None:
        if not (isinstance(self.seconds, int | float) and not isinstance(self.seconds, bool)
                and 0 < self.seconds <= DEADLINE_SECONDS_MAX):
            raise ValueError(f"a deadline's seconds must be a positive number, at most "
                             f"{DEADLINE_SECONDS_MAX} (ten years), not {self.seconds!r}")
        if self.on_expiry not in DEADLINE_OUTCOMES:
            raise ValueError(f"unknown on_expiry {self.on_expiry!r}; use one of: "
                             f"{', '.join(DEADLINE_OUTCOMES)}")
        for name in ("remind_before", "escalate_for"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and not isinstance(value, bool)
                    and 0 <= value <= DEADLINE_SECONDS_MAX):
                raise ValueError(f"a deadline's {name} must be a number of seconds >= 0, at "
                                 f"most {DEADLINE_SECONDS_MAX} (ten years), not {value!r}")

    @classmethod
    def from_value(cls, value: Any) -> QuestionDeadline:
        """A deadline from a question's own value (``"deadline": {"seconds": 30,
        "on_expiry": "answer", "default": "no", "remind_before": 10, "escalate_to":
        ["leads"], "escalate_for": 60}``), or ``ValueError`` naming what is wrong."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            return cls(seconds=float(value))
        if not isinstance(value, Mapping):
            raise ValueError(f"a question's deadline is a number of seconds or an object "
                             f"with 'seconds', not {value!r}")
        unknown = sorted(set(value) - DEADLINE_KEYS)
        if unknown:
            raise ValueError(f"unknown deadline key(s) {', '.join(map(repr, unknown))}; use: "
                             f"{', '.join(sorted(DEADLINE_KEYS))}")
        escalate = value.get("escalate_to") or ()
        if isinstance(escalate, str):
            escalate = (escalate,)
        on_expiry = value.get("on_expiry") or ("answer" if "default" in value else "cancel")
        seconds: Any = value.get("seconds")  # checked by __post_init__, naming it
        return cls(seconds=seconds, on_expiry=on_expiry,
                   default=value.get("default"),
                   remind_before=value.get("remind_before") or 0.0,
                   escalate_to=tuple(str(g).strip()[:GROUP_NAME_MAX] for g in escalate
                                     if str(g).strip()),
                   escalate_for=value.get("escalate_for") or 0.0)


DEADLINE_KEYS = frozenset({"seconds", "on_expiry", "default", "remind_before", "escalate_to",
                           "escalate_for"})


def question_deadline(declared: Mapping[str, QuestionDeadline], question: Any
                      ) -> QuestionDeadline | None:
    """The deadline of ``question``: the one its value carries (``"deadline": …``, how a
    ``langgraph.json`` graph's ``interrupt()`` says it; ``ValueError`` if malformed), else
    the one ``declared`` for its ``field``, its ``kind`` or ``"*"`` (the graph's default);
    None: it may wait for ever."""
    if isinstance(question, Mapping):
        if question.get("deadline") is not None:
            return QuestionDeadline.from_value(question["deadline"])
        for key in (question.get("field"), question.get("kind")):
            if isinstance(key, str) and key in declared:
                return declared[key]
    return declared.get("*")


def no_state_edit_update(state: Mapping[str, Any], edit: Mapping[str, Any]
                         ) -> Mapping[str, Any]:
    """A graph that keeps no record of where its values came from adds nothing to an edit."""
    return {}


@dataclass(frozen=True)
class StateField:
    """One named field of a state channel that holds a record of fields (the acquisition
    planner's ``values``: ``market.price`` …), checked as the graph's own question forms and
    start form check it, so a state edit is typed per field, not per channel."""

    name: str
    label: str
    check: Callable[[Any], Checked]
    """``raw -> (value, None)`` for a good value (as the graph keeps it: ``"47"`` → 47.0),
    ``(None, reason)`` naming the bad value and what would be accepted."""
    hint: str = ""


def no_state_fields(state: Mapping[str, Any]) -> Mapping[str, tuple[StateField, ...]]:
    """A graph whose channels hold no records of checked fields declares none."""
    return {}


@dataclass(frozen=True)
class GraphSpec:
    """A registered graph: how to build it, what it takes and what it is."""

    name: str
    title: str
    description: str
    version: int
    build: Callable[..., StateGraph[Any]]
    """``build(*, llm: LLMPort, search: SearchPort) -> StateGraph`` (uncompiled)."""
    make_input: Callable[[Mapping[str, Any]], Any]
    """Turns start values into the graph's initial state, cleaning them with
    :func:`clean_inputs` over ``input_fields``; raises InputError."""
    input_fields: tuple[InputField, ...] = ()
    tags: tuple[str, ...] = field(default=())
    output_of: Callable[[Any], Any] = default_output
    """Picks the run's output from its final state values (stored, returned, broadcast)."""
    present_result: Callable[[Any], ResultCard] = generic_result_card
    """Turns a run's output into the result card the pages show."""
    task_view: TaskView | None = None
    """The graph's task DAG, if it has one (the trace then draws it)."""
    decisions_channel: str = ""
    """The state channel of decision provenance records ("why this way"), if any."""
    questions: Mapping[str, QuestionKind] = field(default_factory=dict)
    """The kinds of question it asks beyond the generic ones (``planner.questions``)."""
    input_schema: Mapping[str, Any] | None = None
    """The JSON Schema of the start input, if not the one ``input_fields`` describe."""
    failed_when: Mapping[str, Any] = field(default_factory=dict)
    """How the run's output says its goal failed though the graph returned: top-level keys
    of the output and the values they then hold (``{"status": "failed"}``); empty: its
    output never says so. Such a run is shown "Finished — <failure_label>" everywhere."""
    failure_label: str = "failed"
    """What the outcome of such a run is called (``plan failed``)."""
    failure_reason_key: str = ""
    """The output key that says why it failed (``reason``), if any."""
    tool_nodes: tuple[str, ...] = ("tools",)
    """Nodes whose time is tool time (search, code, APIs) in the run's waterfall; the model
    calls inside them count as model time. The default is LangGraph's ``ToolNode`` name."""
    chat_goal_field: str = ""
    """The input field a chat client's ``{"messages": [...]}`` fills with its last human
    message (Agent Chat UI starts every graph so); empty: the graph takes no chat input."""
    messages_channel: str = ""
    """The state channel holding the graph's chat transcript (``planner.chat``: the goal,
    its questions and answers, its result), which chat clients read as ``values.messages``;
    a chat client's messages start it. Empty: the graph keeps no transcript."""
    review_questions: bool = False
    """Its questions (``planner.questions``' shape) are also offered to chat clients and
    inboxes in the standard interrupt shapes, and their decisions taken as answers."""
    internal_channels: tuple[str, ...] = ()
    """State channels that are the graph's own bookkeeping (versions, statuses, logs): state
    forms fold them under "advanced", below the channels an operator means to edit."""
    on_state_edit: Callable[[Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any]] = (
        no_state_edit_update)
    """Given the state values before an operator's edit and the edited channels, the other
    channels the graph updates with it to keep its own record true (written in the same
    ``update_state``); the default adds nothing."""
    state_fields: Callable[[Mapping[str, Any]], Mapping[str, tuple[StateField, ...]]] = (
        no_state_fields)
    """Given the state values (what of them is known), the channels whose value is a record
    of named fields, and those fields with their checks: a state edit (the edit form, the
    REST API, the LangGraph API's ``update_state``) checks each field so and keeps it as its
    check makes it; a bad value is refused naming ``channel.field``, never left to crash a
    node later. The default declares none."""
    per_run: Callable[..., AbstractAsyncContextManager[StateGraph[Any]]] | None = None
    """A graph made anew for each run (a ``langgraph.json`` factory, as LangGraph's server
    calls one): ``per_run(config=…, context=…, user=…)`` is entered for the run's
    execution and yields its uncompiled graph; None: :attr:`build`'s graph serves every run."""

    question_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Who answers its questions: names of the host's groups (Django auth groups in
    Planwatch), by the question's ``field``, else its ``kind``, else ``"*"`` for every
    question; a question may name its own in its value (``"groups": [...]``). A question
    naming no group is answered by anyone the host lets answer."""

    question_deadlines: Mapping[str, QuestionDeadline] = field(default_factory=dict)
    """How long its questions may wait and what happens then, by the question's ``field``,
    else its ``kind``, else ``"*"`` (the graph's default); a question may carry its own in
    its value (``"deadline": {...}``, see :meth:`QuestionDeadline.from_value`)."""
    budget: Mapping[str, Any] | None = None
    """Its runs' budgets (the dashboard's ``budget_parse`` form: ``{"max_cost_usd": 0.5,
    "on_limit": "pause"}``), over the server's default, under an assistant's and a run's."""

    prompts: Mapping[str, PromptTemplate] = field(default_factory=dict)
    """The prompts its nodes send the model, by name: a run (a fork) may replace each with
    a template of its own (``planner.steering``); empty: none may be replaced."""

    takes_model: bool = True
    """Its model calls go through the LLM port :attr:`build` is given, so a run may choose
    another model (``planner.steering.ModelSettings``); False for a graph that makes its
    own (a ``langgraph.json`` graph)."""

    def model_settings(self, raw: Mapping[str, Any] | None) -> ModelSettings:
        """A run's choice of model and prompts, checked against this graph
        (``planner.steering.SettingsError`` naming each bad field)."""
        return clean_model_settings(raw, prompts=self.prompts, takes_model=self.takes_model,
                                    graph=f"graph {self.name!r}")

    def goal_failure(self, output: Any) -> str | None:
        """Why the goal failed when ``output`` (a returned run's) says so (see
        :attr:`failed_when`): the reason ("" when none is given); None when it did not."""
        if not self.failed_when or not isinstance(output, Mapping) or any(
                output.get(key) != value for key, value in self.failed_when.items()):
            return None
        reason = output.get(self.failure_reason_key) if self.failure_reason_key else None
        return str(reason or "")

    def deadline_for(self, question: Any) -> QuestionDeadline | None:
        """The deadline of ``question`` (see :attr:`question_deadlines`)."""
        return question_deadline(self.question_deadlines, question)

    def groups_for(self, question: Any) -> tuple[str, ...]:
        """The groups that answer ``question`` (see :attr:`question_groups`)."""
        return answer_groups(self.question_groups, question)

    def input_json_schema(self) -> dict[str, Any]:
        """The start input as JSON Schema (what LangGraph's server API calls input_schema)."""
        if self.input_schema is not None:
            return dict(self.input_schema)
        return fields_json_schema(self.title, self.input_fields)

    @cached_property
    def inspection_builder(self) -> StateGraph[Any]:
        """The graph's builder, made once with the offline ports, to be inspected (never run)."""
        return self.build(llm=make_llm("scripted", think_time=0), search=default_search())

    @cached_property
    def inspection_graph(self) -> Any:
        """The builder compiled once with no checkpointer: topology, schemas, state reads."""
        return self.inspection_builder.compile()

    def chat_input(self, values: Mapping[str, Any]) -> Mapping[str, Any]:
        """``values`` with a chat client's ``messages`` taken as :attr:`chat_goal_field`
        (its last human message), if the graph takes chat input; else as they are. A graph
        with a :attr:`messages_channel` keeps the messages there too (its transcript
        starts with them). ``InputError`` when the messages hold no human text."""
        if not self.chat_goal_field or "messages" not in values:
            return values
        rest = {k: v for k, v in values.items() if k != "messages"}
        goal = last_human_text(values["messages"])
        if not goal:
            raise InputError({"messages": (
                f"no human message with text to take as the {self.chat_goal_field}; send "
                f'one, such as {{"type": "human", "content": "…"}}')})
        rest.setdefault(self.chat_goal_field, goal)
        if self.messages_channel:
            rest[self.messages_channel] = values["messages"]
        return rest

    def thread_id(self, run_thread: str) -> str:
        """The checkpoint thread id for a run: ``<run thread>:planner`` (``:v2`` … on bumps)."""
        base = f"{run_thread}:planner"
        return base if self.version <= 1 else f"{base}:v{self.version}"
