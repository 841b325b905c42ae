"""LangGraph checkpoints in the admin: listed from the saver's table, decoded by the saver."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import ChangeList
from django.db.models import F, Func, QuerySet, TextField
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from dashboard import checkpoints as reads
from dashboard.admin.base import (
    AuditAdmin,
    change_url,
    changelist_url,
    link,
    link_to_checkpoint,
    pretty_json,
    trace_url,
)
from dashboard.models import Checkpoint, Interrupt, Run, RunEvent

SOURCES = (("input", "input"), ("loop", "loop"), ("update", "update"), ("fork", "fork"))


class MetadataSource(Func):
    """``metadata.source`` as text, spelled as the PostgreSQL index of migration 0003 is."""

    output_field = TextField()
    template = "(%(expressions)s ->> 'source')"

    def __init__(self) -> None:
        super().__init__(F("metadata"))

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        """SQLite's saver stores the JSON as a BLOB: read it as text first."""
        return self.as_sql(compiler, connection,
                           template="json_extract(CAST(%(expressions)s AS TEXT), '$.source')")


class ThreadFilter(admin.SimpleListFilter):
    """By thread: the chosen one and the threads of the latest runs (never a DISTINCT scan)."""

    title = "thread"
    parameter_name = "thread"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        """The current thread and the ten latest runs' threads."""
        threads = list(Run.objects.order_by("-created_at").values_list("thread_id", flat=True)[:10])
        chosen = self.value()
        if chosen and chosen not in threads:
            threads.insert(0, chosen)
        return [(t, t) for t in threads]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        """Only that thread's checkpoints."""
        return queryset.filter(thread_id=self.value()) if self.value() else queryset


class NamespaceFilter(admin.SimpleListFilter):
    """By namespace: the root graph, subgraphs, or one namespace."""

    title = "namespace"
    parameter_name = "ns"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        """Root or subgraphs, plus the namespace chosen through a link."""
        options = [("root", "root graph"), ("sub", "subgraphs")]
        chosen = self.value()
        if chosen and chosen not in ("root", "sub"):
            options.append((chosen, chosen))
        return options

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        """Checkpoints in the chosen namespace(s)."""
        value = self.value()
        if value == "root":
            return queryset.filter(checkpoint_ns="")
        if value == "sub":
            return queryset.exclude(checkpoint_ns="")
        return queryset.filter(checkpoint_ns=value) if value else queryset


class SourceFilter(admin.SimpleListFilter):
    """By what made the checkpoint: input, loop, update or fork (``metadata.source``)."""

    title = "source"
    parameter_name = "source"

    def lookups(self, request: HttpRequest, model_admin: Any) -> tuple[tuple[str, str], ...]:
        """LangGraph's checkpoint sources."""
        return SOURCES

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        """Checkpoints of that source (an index on PostgreSQL: migration 0003)."""
        if not self.value():
            return queryset
        return queryset.alias(src=MetadataSource()).filter(src=self.value())


class CheckpointChangeList(ChangeList):
    """The list, plus the nodes whose writes made each listed checkpoint (one query a page)."""

    def get_results(self, request: HttpRequest) -> None:
        """Fetch the page, then the writers of its rows' parents."""
        super().get_results(request)
        rows = list(self.result_list)
        keys = [(r.thread_id, r.checkpoint_ns, r.parent_checkpoint_id)
                for r in rows if r.parent_checkpoint_id]
        writers = reads.checkpoint_writers(keys=keys)
        for row in rows:
            row.writers = writers.get((row.thread_id, row.checkpoint_ns, row.parent_checkpoint_id),
                                      [])
        self.result_list = rows


@admin.register(Checkpoint)
class CheckpointAdmin(AuditAdmin):
    """Checkpoints, newest first; the detail decodes values with the saver's serializer."""

    list_display = ("checkpoint", "thread", "namespace", "step", "source", "writers", "parent",
                    "time")
    list_display_links = None
    list_filter = (ThreadFilter, NamespaceFilter, SourceFilter)
    search_fields = ("thread_id",)
    search_help_text = "A thread id or run id (or its beginning)."
    ordering = ("-checkpoint_id",)
    fieldsets = (
        (None, {"fields": ("thread", "namespace", "checkpoint_id", "step", "source", "time",
                           "run_link", "trace_link", "parent", "children")}),
        ("Channel values", {"fields": ("values",)}),
        ("Changes against the parent checkpoint", {"fields": ("diff",)}),
        ("Metadata", {"fields": ("metadata_json",)}),
        ("Pending writes", {"fields": ("pending_writes",)}),
        ("Pending tasks and interrupts", {"fields": ("next_tasks", "interrupts")}),
    )
    readonly_fields = tuple(str(f) for _, spec in fieldsets for f in spec["fields"])

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        """The list that also names each checkpoint's writers."""
        return CheckpointChangeList

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str
                           ) -> tuple[QuerySet, bool]:
        """A thread id prefix (a page's run's id is its thread's): an index range, never a
        scan."""
        term = search_term.strip()
        return (queryset.filter(thread_id__startswith=term) if term else queryset), False

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None
                   ) -> Checkpoint | None:
        """The row, decoded by the saver, with its parent, children and run."""
        row = self.get_queryset(request).filter(checkpoint_id=unquote(object_id)).first()
        if row is None:
            return None
        row.decode_error = ""
        try:
            row.view, row.parent_view = reads.checkpoint_with_parent(
                thread_id=row.thread_id, checkpoint_ns=row.checkpoint_ns,
                checkpoint_id=row.checkpoint_id,
            )
        except Exception as exc:  # a row the saver cannot read is shown, not a 500
            row.view = row.parent_view = None
            row.decode_error = f"The saver could not decode this checkpoint: {exc!r}"
        row.child_ids = list(
            Checkpoint.objects.filter(thread_id=row.thread_id, checkpoint_ns=row.checkpoint_ns,
                                      parent_checkpoint_id=row.checkpoint_id)
            .order_by("checkpoint_id").values_list("checkpoint_id", flat=True)[:50]
        )
        # the run whose LangGraph run its metadata names (a thread's checkpoints are its
        # runs')
        named = (row.view.metadata.get("run_id") if row.view else None) or ""
        try:
            runs = Run.objects.filter(thread_id=row.thread_id,
                                      langgraph_runs__id=uuid.UUID(str(named)))
        except ValueError:  # written before runs were named (or by hand): the first run
            runs = Run.objects.filter(thread_id=row.thread_id).order_by("created_at")
        row.run = runs.first()
        row.event = RunEvent.objects.filter(
            run=row.run, kind=RunEvent.Kind.CHECKPOINT, checkpoint_id=row.checkpoint_id,
        ).first() if row.run else None
        return row

    # -- columns ---------------------------------------------------------------------------

    @admin.display(description="checkpoint", ordering="checkpoint_id")
    def checkpoint(self, obj: Checkpoint) -> str:
        """The checkpoint id, linking to its decoded detail."""
        return link(change_url("checkpoint", obj.checkpoint_id), obj.checkpoint_id)

    @admin.display(description="thread")
    def thread(self, obj: Checkpoint) -> str:
        """The thread, linking to its checkpoints."""
        return link(changelist_url("checkpoint", thread=obj.thread_id), obj.thread_id)

    @admin.display(description="namespace")
    def namespace(self, obj: Checkpoint) -> str:
        """The namespace (empty for the root graph)."""
        return obj.checkpoint_ns or "(root)"

    @admin.display(description="step")
    def step(self, obj: Checkpoint) -> Any:
        """The super-step (``metadata.step``)."""
        return (obj.metadata or {}).get("step")

    @admin.display(description="source")
    def source(self, obj: Checkpoint) -> Any:
        """What made the checkpoint (``metadata.source``)."""
        return (obj.metadata or {}).get("source")

    @admin.display(description="writes by")
    def writers(self, obj: Checkpoint) -> str:
        """The nodes whose writes this checkpoint holds."""
        nodes = getattr(obj, "writers", None)
        if nodes is None:
            keys = [(obj.thread_id, obj.checkpoint_ns, obj.parent_checkpoint_id or "")]
            nodes = reads.checkpoint_writers(keys=keys).get(keys[0], [])
        return ", ".join(nodes) or "—"

    @admin.display(description="parent")
    def parent(self, obj: Checkpoint) -> str:
        """The parent checkpoint."""
        return link_to_checkpoint(obj.parent_checkpoint_id or "")

    @admin.display(description="time")
    def time(self, obj: Checkpoint) -> Any:
        """When it was taken (from the uuid6 id)."""
        return reads.checkpoint_time(obj.checkpoint_id)

    # -- detail ----------------------------------------------------------------------------

    @admin.display(description="run")
    def run_link(self, obj: Checkpoint) -> str:
        """The run on this thread."""
        run = getattr(obj, "run", None)
        return link(change_url("run", run.id), run) if run else "— (no run on this thread)"

    @admin.display(description="trace")
    def trace_link(self, obj: Checkpoint) -> str:
        """The run's trace view replayed up to this checkpoint's event."""
        run, event = getattr(obj, "run", None), getattr(obj, "event", None)
        if not run:
            return "—"
        if not event:
            return link(trace_url(run.id), "open the trace")
        replay = link(trace_url(run.id, at=event.seq),
                      f"open the trace at step {self.step(obj)} (event #{event.seq})")
        if event.namespace:
            return replay
        fork = reverse("dashboard:run_fork", args=[run.id])
        rerun = link(f"{fork}?{urlencode({'checkpoint': event.checkpoint_id})}",
                     "re-run from here (edit state and fork)")
        return format_html("{} · {}", replay, rerun)

    @admin.display(description="children")
    def children(self, obj: Checkpoint) -> str:
        """The checkpoints whose parent this is."""
        ids = getattr(obj, "child_ids", [])
        if not ids:
            return "—"
        return format_html_join(" ", '<a href="{}">{}</a>',
                                ((change_url("checkpoint", c), c) for c in ids))

    @admin.display(description="values")
    def values(self, obj: Checkpoint) -> str:
        """The decoded channel values."""
        view = getattr(obj, "view", None)
        return pretty_json(view.values) if view else (getattr(obj, "decode_error", "") or "—")

    @admin.display(description="diff")
    def diff(self, obj: Checkpoint) -> str:
        """What changed in the channel values since the parent checkpoint."""
        view, parent = getattr(obj, "view", None), getattr(obj, "parent_view", None)
        if view is None:
            return "—"
        changes = reads.values_diff(parent.values if parent else {}, view.values)
        if not changes:
            return "no change"
        rows = format_html_join(
            "", '<tr class="pw-diff-{}"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
            ((c["op"], c["path"], c["op"],
              pretty_json(c["before"]) if "before" in c else "",
              pretty_json(c["after"]) if "after" in c else "") for c in changes),
        )
        return format_html('<table class="pw-diff"><thead><tr><th>path</th><th>change</th>'
                           "<th>before</th><th>after</th></tr></thead><tbody>{}</tbody></table>",
                           rows)

    @admin.display(description="metadata")
    def metadata_json(self, obj: Checkpoint) -> str:
        """The checkpoint's metadata."""
        view = getattr(obj, "view", None)
        return pretty_json(view.metadata if view else obj.metadata)

    @admin.display(description="pending writes")
    def pending_writes(self, obj: Checkpoint) -> str:
        """Writes of the tasks that ran from this checkpoint, decoded."""
        view = getattr(obj, "view", None)
        return pretty_json(view.pending_writes) if view and view.pending_writes else "—"

    @admin.display(description="next tasks")
    def next_tasks(self, obj: Checkpoint) -> str:
        """The nodes scheduled from this checkpoint (from the run's event log)."""
        event = getattr(obj, "event", None)
        nodes = (event.payload.get("next") or []) if event else []
        return ", ".join(nodes) or "—"

    @admin.display(description="interrupts")
    def interrupts(self, obj: Checkpoint) -> str:
        """Interrupts pending at this checkpoint, and the answers resumed from it."""
        view = getattr(obj, "view", None)
        raised = [w["value"] for w in (view.pending_writes if view else [])
                  if w["channel"] == "__interrupt__"]
        answered = Interrupt.objects.filter(checkpoint_id=obj.checkpoint_id,
                                            run__thread_id=obj.thread_id)
        parts = [pretty_json(value) for value in raised]
        parts += [link(change_url("interrupt", i.pk), f"answered: {i}") for i in answered]
        return format_html_join("", "<div>{}</div>", ((p,) for p in parts)) if parts else "—"
