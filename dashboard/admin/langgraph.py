"""Assistants, their versions and crons of LangGraph's server API in the admin (read-only)."""

from __future__ import annotations

from django.contrib import admin

from dashboard.admin.base import AuditAdmin, pretty_json
from dashboard.models import Assistant, AssistantVersion, Cron, StoreItem


@admin.register(Assistant)
class AssistantAdmin(AuditAdmin):
    """Assistants clients created: their graph, version, config and context."""

    list_display = ("name", "id", "graph", "version", "created_by_name", "updated_at")
    list_filter = ("graph",)
    search_fields = ("name",)
    readonly_fields = ("id", "graph", "name", "description", "version", "config_json",
                       "context_json", "metadata_json", "created_by_name", "created_at",
                       "updated_at")
    fields = readonly_fields

    @admin.display(description="config")
    def config_json(self, obj: Assistant) -> str:
        """Its config."""
        return pretty_json(obj.config)

    @admin.display(description="context")
    def context_json(self, obj: Assistant) -> str:
        """Its runtime context."""
        return pretty_json(obj.context)

    @admin.display(description="metadata")
    def metadata_json(self, obj: Assistant) -> str:
        """Its metadata."""
        return pretty_json(obj.metadata)


@admin.register(AssistantVersion)
class AssistantVersionAdmin(AuditAdmin):
    """Every version of every assistant."""

    list_display = ("assistant", "version", "graph", "name", "created_at")
    list_filter = ("graph",)
    list_select_related = ("assistant",)


@admin.register(Cron)
class CronAdmin(AuditAdmin):
    """Scheduled runs: their schedule, next and last run."""

    list_display = ("id", "schedule", "assistant_id", "thread", "next_run_date",
                    "last_run_date", "enabled")
    list_filter = ("enabled",)


@admin.register(StoreItem)
class StoreItemAdmin(AuditAdmin):
    """LangGraph's store: the items graphs and clients wrote (listed, read-only)."""

    list_display = ("prefix", "key", "value_json", "updated_at", "expires_at")
    list_display_links = None  # the table's key is (prefix, key): no page per item
    search_fields = ("prefix", "key")
    search_help_text = "A namespace (labels joined by '.') or a key."

    @admin.display(description="value")
    def value_json(self, obj: StoreItem) -> str:
        """Its value."""
        return pretty_json(obj.value)
