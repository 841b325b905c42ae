"""The registry of planner graphs: the only way the dashboard learns about a graph.

A graph is registered with a builder that returns an *uncompiled* ``StateGraph``; the
host compiles it with its own checkpointer (the graph never knows its storage).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from langgraph.graph import StateGraph

from planner.llm import LLMPort
from planner.presentation import ResultCard, default_output, generic_result_card
from planner.questions import QuestionKind
from planner.search import SearchPort

FieldKind = Literal["text", "textarea", "number", "integer", "choice", "boolean", "json"]


class InputError(ValueError):
    """Raised by a graph's ``make_input`` when the start input is invalid.

    ``errors`` maps a field name (or ``"__all__"``) to a message naming the problem.
    """

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


@dataclass(frozen=True)
class InputField:
    """One field of a graph's start form."""

    name: str
    label: str
    kind: FieldKind = "text"
    required: bool = True
    default: Any = None
    help: str = ""
    choices: tuple[str, ...] = ()
    min_value: float | None = None
    max_value: float | None = None


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


@dataclass(frozen=True)
class GraphSpec:
    """A registered graph: how to build it, what it takes and what it is."""

    name: str
    title: str
    description: str
    version: int
    build: Callable[..., StateGraph]
    """``build(*, llm: LLMPort, search: SearchPort) -> StateGraph`` (uncompiled)."""
    make_input: Callable[[Mapping[str, Any]], dict[str, Any]]
    """Turns cleaned start-form values into the graph's initial state; raises InputError."""
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

    def thread_id(self, run_thread: str) -> str:
        """The checkpoint thread id for a run: ``<run thread>:planner`` (``:v2`` … on bumps)."""
        base = f"{run_thread}:planner"
        return base if self.version <= 1 else f"{base}:v{self.version}"


GRAPHS: dict[str, GraphSpec] = {}


def register(spec: GraphSpec) -> GraphSpec:
    """Add ``spec`` to the registry; a second graph of the same name is an error."""
    if spec.name in GRAPHS and GRAPHS[spec.name] is not spec:
        raise ValueError(f"graph {spec.name!r} is already registered")
    GRAPHS[spec.name] = spec
    return spec


def get_graph(name: str) -> GraphSpec:
    """Return the registered graph ``name`` or raise ``KeyError`` naming the known ones."""
    _load_builtin()
    try:
        return GRAPHS[name]
    except KeyError:
        known = ", ".join(sorted(GRAPHS)) or "(none)"
        raise KeyError(f"unknown graph {name!r}; registered graphs: {known}") from None


def all_graphs() -> list[GraphSpec]:
    """Every registered graph, sorted by name."""
    _load_builtin()
    return [GRAPHS[n] for n in sorted(GRAPHS)]


def _load_builtin() -> None:
    """Import the built-in graph packages, which register themselves on import."""
    import planner.acquisition
    import planner.decomposition  # noqa: F401


__all__ = [
    "GRAPHS",
    "GraphSpec",
    "InputError",
    "InputField",
    "LLMPort",
    "SearchPort",
    "TaskView",
    "all_graphs",
    "get_graph",
    "register",
]
