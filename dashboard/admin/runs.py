"""Runs, their events and their interrupts in the admin, linked to each other and to traces."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import CharField, Q, QuerySet
from django.db.models.functions import Cast
from django.http import HttpRequest
from django.utils.html import format_html_join

from dashboard.admin.base import (
    AuditAdmin,
    change_url,
    changelist_url,
    link,
    link_to_checkpoint,
    pretty_json,
    trace_url,
)
from dashboard.models import Interrupt, Notice, Run, RunEvent, Thread


def _search(queryset: QuerySet, term: str, *, thread: str, exact: tuple[str, ...] = ()
            ) -> QuerySet:
    """Rows whose thread starts with ``term`` (a run id or thread id), or an exact field."""
    term = term.strip()
    if not term:
        return queryset
    query = Q(**{f"{thread}__startswith": term})
    for name in exact:
        query |= Q(**{name: term})
    return queryset.filter(query)


@admin.register(Thread)
class ThreadAdmin(AuditAdmin):
    """LangGraph threads (the API's conversations): who opened them, their runs."""

    list_display = ("short_id", "graph", "created_by_name", "created_at", "updated_at", "runs")
    list_filter = ("graph", "created_at")
    search_fields = ("id",)
    search_help_text = "A thread id (or its beginning), or a graph name."
    readonly_fields = ("id", "graph", "metadata_json", "created_by_name", "created_at",
                       "updated_at", "runs")
    fields = readonly_fields

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str
                           ) -> tuple[QuerySet, bool]:
        """Prefix search on the id (as text), exact on the graph."""
        term = search_term.strip()
        if not term:
            return queryset, False
        ids = Thread.objects.annotate(text=Cast("id", CharField())).filter(
            text__startswith=term.lower()).values("id")
        return queryset.filter(Q(id__in=ids) | Q(graph=term)), False

    @admin.display(description="thread", ordering="id")
    def short_id(self, obj: Thread) -> str:
        """The thread's id, shortened."""
        return str(obj.id)[:8]

    @admin.display(description="metadata")
    def metadata_json(self, obj: Thread) -> str:
        """The metadata its clients set."""
        return pretty_json(obj.metadata)

    @admin.display(description="runs")
    def runs(self, obj: Thread) -> str:
        """Its runs in the admin."""
        return format_html_join("", '<a href="{}">runs</a>',
                                [(changelist_url("run", conversation__id__exact=obj.id),)])


@admin.register(Run)
class RunAdmin(AuditAdmin):
    """Runs: filter by graph, status, outcome and date; search by run id or thread id."""

    list_display = ("short_id", "graph", "status", "outcome", "created_by", "created_at",
                    "finished_at", "current_node", "model_calls", "total_tokens", "cost_usd",
                    "related")
    list_filter = ("graph", "status", "outcome", "created_at")
    search_fields = ("thread_id",)
    search_help_text = "A run id or thread id (or its beginning), or a graph name."
    list_select_related = ("created_by",)
    date_hierarchy = None
    readonly_fields = ("id", "related", "langgraph_runs", "created_at", "last_seq", "owner",
                       "heartbeat_at", "model_calls", "input_tokens", "output_tokens",
                       "total_tokens", "cost_usd")

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str
                           ) -> tuple[QuerySet, bool]:
        """Prefix search on the thread id (which starts with the run id), exact on graph."""
        return _search(queryset, search_term, thread="thread_id", exact=("graph",)), False

    @admin.display(description="run", ordering="id")
    def short_id(self, obj: Run) -> str:
        """The run's id, shortened."""
        return str(obj.id)[:8]

    @admin.display(description="audit")
    def related(self, obj: Run) -> str:
        """Links to the run's events, interrupts, checkpoints and live trace."""
        links = [
            (changelist_url("runevent", run__id__exact=obj.id), "events"),
            (changelist_url("interrupt", run__id__exact=obj.id), "interrupts"),
            (changelist_url("checkpoint", thread=obj.thread_id), "checkpoints"),
            (trace_url(obj.id), "trace"),
        ]
        return format_html_join(" · ", '<a href="{}">{}</a>', links)


    @admin.display(description="LangGraph runs")
    def langgraph_runs(self, obj: Run) -> str:
        """The run requests of LangGraph's API it is made of: its start, then each resume or
        continue, with their LangGraph status and the first seq of their events."""
        return format_html_join(
            "<br>", "{} · {} · from seq {} · {}",
            [(str(r.id)[:8], r.langgraph_status, r.first_seq,
              f"{r.created_at:%Y-%m-%d %H:%M:%S}") for r in obj.langgraph_runs.all()])


@admin.register(RunEvent)
class RunEventAdmin(AuditAdmin):
    """The event log: filter by kind and date; search by node, run id or thread id."""

    list_display = ("seq", "run_link", "kind", "node", "namespace", "step", "checkpoint_link",
                    "duration_ms", "created_at")
    list_display_links = ("seq",)
    list_filter = ("kind", "created_at")
    search_fields = ("node",)
    search_help_text = "A node name, or a run id or thread id (or its beginning)."
    list_select_related = ("run",)
    readonly_fields = ("run_link", "checkpoint_link", "trace_link", "payload_json", "created_at")
    exclude = ("payload",)

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str
                           ) -> tuple[QuerySet, bool]:
        """Exact node name, or a prefix of the run's thread id."""
        return _search(queryset, search_term, thread="run__thread_id", exact=("node",)), False

    @admin.display(description="run", ordering="run")
    def run_link(self, obj: RunEvent) -> str:
        """The run the event belongs to."""
        return link(change_url("run", obj.run_id), obj.run)

    @admin.display(description="checkpoint")
    def checkpoint_link(self, obj: RunEvent) -> str:
        """The checkpoint the event names."""
        return link_to_checkpoint(obj.checkpoint_id)

    @admin.display(description="trace")
    def trace_link(self, obj: RunEvent) -> str:
        """The live trace view at this event."""
        return link(trace_url(obj.run_id, at=obj.seq), "open the trace at this event")

    @admin.display(description="payload")
    def payload_json(self, obj: RunEvent) -> str:
        """The event's payload, readable."""
        return pretty_json(obj.payload)


@admin.register(Interrupt)
class InterruptAdmin(AuditAdmin):
    """Interrupts and their audit trail: who answered, what, when, from which checkpoint."""

    list_display = ("question", "run_link", "status", "answered_by_name", "answered_at",
                    "answer_short", "checkpoint_link", "created_at")
    list_display_links = ("question",)
    list_filter = ("status", "answered_at", "created_at")
    search_fields = ("node",)
    search_help_text = "A node name, an interrupt id, or a run id or thread id (or its beginning)."
    list_select_related = ("run", "answered_by")
    fieldsets = (
        (None, {"fields": ("run_link", "trace_link", "interrupt_id", "node", "namespace",
                           "status", "created_at", "payload_json")}),
        ("Audit trail", {"fields": ("answered_by", "answered_by_name", "answered_at",
                                    "answer_json", "checkpoint_link")}),
    )
    readonly_fields = ("run_link", "trace_link", "interrupt_id", "node", "namespace", "status",
                       "created_at", "payload_json", "answered_by", "answered_by_name",
                       "answered_at", "answer_json", "checkpoint_link")

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str
                           ) -> tuple[QuerySet, bool]:
        """Exact node or interrupt id, or a prefix of the run's thread id."""
        return _search(queryset, search_term, thread="run__thread_id",
                       exact=("node", "interrupt_id")), False

    @admin.display(description="question")
    def question(self, obj: Interrupt) -> str:
        """What the run asked."""
        return str(obj.payload.get("prompt") or obj.payload.get("field") or obj.node)

    @admin.display(description="run", ordering="run")
    def run_link(self, obj: Interrupt) -> str:
        """The run that asked."""
        return link(change_url("run", obj.run_id), obj.run)

    @admin.display(description="trace")
    def trace_link(self, obj: Interrupt) -> str:
        """The run's live trace view."""
        return link(trace_url(obj.run_id), "open the trace")

    @admin.display(description="resumed from checkpoint")
    def checkpoint_link(self, obj: Interrupt) -> str:
        """The checkpoint the answer resumed the run from."""
        return link_to_checkpoint(obj.checkpoint_id)

    @admin.display(description="answer")
    def answer_short(self, obj: Interrupt) -> Any:
        """The answer, short."""
        text = "—" if obj.answer is None else str(obj.answer)
        return text if len(text) <= 60 else text[:59] + "…"

    @admin.display(description="payload")
    def payload_json(self, obj: Interrupt) -> str:
        """The question's payload, readable."""
        return pretty_json(obj.payload)

    @admin.display(description="answer")
    def answer_json(self, obj: Interrupt) -> str:
        """The answer given, readable."""
        return pretty_json(obj.answer) if obj.answer is not None else "—"


@admin.register(Notice)
class NoticeAdmin(AuditAdmin):
    """Notices of questions and of runs' budgets (e-mail, webhook): sent, failed or
    retried, and why."""

    list_display = ("kind", "channel", "address", "status", "attempts", "sent_at",
                    "last_error", "created_at")
    list_filter = ("status", "channel", "kind", "created_at")
    list_select_related = ("interrupt",)
    readonly_fields = ("interrupt", "run", "event_seq", "kind", "channel", "recipient",
                       "address", "status", "attempts", "next_attempt_at", "claimed_until",
                       "sent_at", "last_error", "link_used_at", "created_at")
