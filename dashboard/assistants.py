"""Services and selectors of assistants (LangGraph's server API resource).

Writes of :class:`~dashboard.models.Assistant` and :class:`~dashboard.models.AssistantVersion`
rows happen here and only here; ``/langgraph/`` and the cron scheduler call these
functions. A registered graph's own assistant (its id is the graph's name) is the
registry's and cannot be changed; assistants a client creates are rows with a UUID.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Max, Q, QuerySet

from dashboard import policy
from dashboard.models import Assistant, AssistantVersion, Cron, Run, Thread
from dashboard.runs import states
from dashboard.selectors import metadata_match
from dashboard.services import RunInputError, RunStateError, ServiceError, User
from planner.registry import GraphSpec, get_graph

SORTABLE = {"assistant_id": "id", "graph_id": "graph", "name": "name",
            "created_at": "created_at", "updated_at": "updated_at"}
"""LangGraph's assistant sort keys and the columns they sort."""


class AssistantNotFound(ServiceError):
    """No assistant (and no graph) has the id."""

    code = "not_found"


class AssistantExists(RunStateError):
    """An assistant with the id exists and ``if_exists`` is ``raise``."""

    code = "assistant_exists"


@dataclass(frozen=True)
class Resolved:
    """What an assistant id names: the graph, and the assistant row (none: the graph's own)."""

    spec: GraphSpec
    assistant: Assistant | None

    @property
    def config(self) -> dict[str, Any]:
        """The assistant's config (``{}`` for the graph's own)."""
        return dict(self.assistant.config or {}) if self.assistant else {}

    @property
    def context(self) -> dict[str, Any]:
        """The assistant's context (``{}`` for the graph's own)."""
        return dict(self.assistant.context or {}) if self.assistant else {}


def _user_or_none(user: User | None) -> Any:
    return user if user is not None and user.is_authenticated else None


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def _graph(graph_id: Any) -> GraphSpec:
    try:
        return get_graph(str(graph_id))
    except KeyError as exc:
        raise RunInputError(str(exc.args[0]), errors={"graph_id": "unknown graph"}) from None


# -- selectors --------------------------------------------------------------------------


def assistant_resolve(*, assistant_id: Any) -> Resolved:
    """The graph and assistant an id names (a graph's name is its own assistant)."""
    wanted = _uuid(assistant_id)
    if wanted is not None:
        row = Assistant.objects.filter(id=wanted).first()
        if row is not None:
            return Resolved(_graph(row.graph), row)
    try:
        return Resolved(get_graph(str(assistant_id)), None)
    except KeyError as exc:
        # "not found" first, as LangGraph's server words it (clients match on it)
        raise AssistantNotFound(f"assistant {assistant_id} not found: {exc.args[0]}; or no "
                                "assistant has that id (list them with POST "
                                "/assistants/search)") from None


def assistant_rows(*, user: User | None, graph_id: str = "", name: str = "",
                   metadata: dict[str, Any] | None = None) -> QuerySet[Assistant]:
    """Created assistants ``user`` may read (:mod:`dashboard.policy`) matching LangGraph's
    search filters (name: a substring)."""
    rows = policy.assistants_visible(user)
    if graph_id:
        rows = rows.filter(graph=graph_id)
    if name:
        rows = rows.filter(name__icontains=name)
    return metadata_match(rows, metadata)


def assistant_versions(*, assistant: Assistant, metadata: dict[str, Any] | None = None
                       ) -> QuerySet[AssistantVersion]:
    """An assistant's versions, newest first (filtered by metadata)."""
    return metadata_match(assistant.versions.all(), metadata).order_by("-version")


def threads_of_assistant(assistant: Assistant) -> QuerySet[Thread]:
    """The threads an assistant ran on, or whose metadata names it."""
    return Thread.objects.filter(Q(runs__assistant=assistant)
                                 | Q(metadata__assistant_id=str(assistant.id))).distinct()


# -- services ---------------------------------------------------------------------------


def assistant_create(*, graph_id: str, user: User | None, assistant_id: Any = None,
                     name: str = "", description: str = "",
                     config: dict[str, Any] | None = None,
                     context: dict[str, Any] | None = None,
                     metadata: dict[str, Any] | None = None,
                     if_exists: str = "raise") -> Assistant:
    """A new assistant of ``graph_id`` at version 1 (``if_exists``: raise or do_nothing)."""
    spec = _graph(graph_id)
    if if_exists not in ("raise", "do_nothing"):
        raise RunInputError(f"if_exists {if_exists!r} is not 'raise' or 'do_nothing'",
                            errors={"if_exists": "raise or do_nothing"})
    wanted = uuid.uuid4()
    if assistant_id:
        parsed = _uuid(assistant_id)
        if parsed is None:
            raise RunInputError(f"assistant_id {assistant_id!r} is not a UUID",
                                errors={"assistant_id": "a UUID"})
        wanted = parsed
        existing = Assistant.objects.filter(id=wanted).first()
        if existing is not None:
            if if_exists == "do_nothing" and policy.may_read(user, existing.created_by_id):
                return existing  # another user's is not handed over (threads answer so too)
            raise AssistantExists(f"assistant {wanted} exists; send if_exists='do_nothing' "
                                  "to get it, or update it with PATCH")
    fields = {"graph": spec.name, "name": name or spec.name, "description": description,
              "config": config or {}, "context": context or {}, "metadata": metadata or {}}
    creator = _user_or_none(user)
    with transaction.atomic():
        assistant = Assistant.objects.create(
            id=wanted, version=1, created_by=creator,
            created_by_name=creator.get_username() if creator else "", **fields)
        AssistantVersion.objects.create(assistant=assistant, version=1, **fields)
    return assistant


def assistant_update(*, assistant: Assistant, graph_id: str | None = None,
                     name: str | None = None, description: str | None = None,
                     config: dict[str, Any] | None = None,
                     context: dict[str, Any] | None = None,
                     metadata: dict[str, Any] | None = None) -> Assistant:
    """A new version of the assistant: what is sent replaces, metadata is merged."""
    fields = {
        "graph": _graph(graph_id).name if graph_id else assistant.graph,
        "name": assistant.name if name is None else name,
        "description": assistant.description if description is None else description,
        "config": assistant.config if config is None else config,
        "context": assistant.context if context is None else context,
        "metadata": {**(assistant.metadata or {}), **(metadata or {})},
    }
    with transaction.atomic():
        locked = Assistant.objects.select_for_update().get(id=assistant.id)
        top = locked.versions.aggregate(top=Max("version"))["top"] or 0
        AssistantVersion.objects.create(assistant=locked, version=top + 1, **fields)
        for key, value in fields.items():
            setattr(locked, key, value)
        locked.version = top + 1
        locked.save()
    return locked


def assistant_set_latest(*, assistant: Assistant, version: Any) -> Assistant:
    """Point the assistant at one of its versions."""
    try:
        picked = assistant.versions.get(version=int(version))
    except (TypeError, ValueError, AssistantVersion.DoesNotExist):
        known = ", ".join(str(v) for v in assistant.versions.values_list("version", flat=True))
        raise RunInputError(f"assistant {assistant.id} has no version {version!r}; its "
                            f"versions: {known}", errors={"version": "unknown version"}) from None
    for key in ("graph", "name", "description", "config", "context", "metadata"):
        setattr(assistant, key, getattr(picked, key))
    assistant.version = picked.version
    assistant.save()
    return assistant


def assistant_delete(*, assistant: Assistant, user: User | None,
                     delete_threads: bool = False) -> None:
    """Delete the assistant and its versions (its runs keep their graph); with
    ``delete_threads`` the threads of it that ``user`` may delete go too (409 while one
    of them runs); another user's threads stay theirs."""
    with transaction.atomic():
        if delete_threads:
            threads = list(threads_of_assistant(assistant).filter(
                id__in=policy.threads_visible(user).values("id")).values_list("id", flat=True))
            running = (Run.objects.filter(conversation__in=threads, state__in=states.ACTIVE)
                       .values_list("conversation", flat=True).first())
            if running:
                raise RunStateError(f"thread {running} of assistant {assistant.id} is busy; "
                                    "cancel its run first")
            Thread.objects.filter(id__in=threads).delete()
        Cron.objects.filter(assistant_id=str(assistant.id)).delete()
        assistant.delete()


def run_assistant_fields(resolved: Resolved) -> dict[str, Any]:
    """What a run records of the assistant that started it."""
    if resolved.assistant is None:
        return {"assistant": None, "assistant_version": None}
    return {"assistant": resolved.assistant, "assistant_version": resolved.assistant.version}
