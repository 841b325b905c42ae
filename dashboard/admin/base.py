"""What every audit page shares: read-only access, bounded counting, and links."""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.core.paginator import Paginator
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html


class CappedPaginator(Paginator):
    """A paginator that counts at most ``cap`` rows, so no page scans a whole table."""

    def __init__(self, object_list: Any, per_page: int, *, cap: int, **kwargs: Any) -> None:
        super().__init__(object_list, per_page, **kwargs)
        self.cap = cap
        self.more = False  # whether rows exist past the cap

    @cached_property
    def count(self) -> int:
        """Rows up to the cap (one bounded ``COUNT`` over a ``LIMIT`` subquery)."""
        rows: Any = self.object_list  # a QuerySet in the admin
        found: int = rows.order_by()[: self.cap + 1].count()
        self.more = found > self.cap
        return min(found, self.cap)


class AuditAdmin(admin.ModelAdmin):
    """Read-only for everyone, superusers included: audit, never edit (writes are services)."""

    actions = None  # no bulk actions, not even "delete selected"
    show_full_result_count = False  # never COUNT the whole table
    list_per_page = 50
    pages_ahead = 10  # pages the paginator looks past the current one

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Nobody adds rows here."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Nobody changes rows here."""
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Nobody deletes rows here."""
        return False

    def get_paginator(self, request: HttpRequest, queryset: Any, per_page: int,
                      orphans: int = 0, allow_empty_first_page: bool = True) -> Paginator:
        """Count only as far as a few pages past the one asked for."""
        try:
            page = max(int(request.GET.get("p", 1)), 1)
        except ValueError:
            page = 1
        return CappedPaginator(queryset, per_page, cap=(page + self.pages_ahead) * per_page,
                               orphans=orphans, allow_empty_first_page=allow_empty_first_page)


def changelist_url(model: str, **params: Any) -> str:
    """The admin list of a dashboard model, filtered by ``params``."""
    url = reverse(f"admin:dashboard_{model}_changelist")
    return f"{url}?{urlencode(params)}" if params else url


def change_url(model: str, pk: Any) -> str:
    """The admin page of one dashboard row."""
    return reverse(f"admin:dashboard_{model}_change", args=[pk])


def trace_url(run_id: Any, **params: Any) -> str:
    """The live trace view of a run (``dashboard:run_detail``), optionally at a step."""
    url = reverse("dashboard:run_detail", args=[run_id])
    return f"{url}?{urlencode(params)}" if params else url


def link(url: str, text: Any) -> str:
    """An HTML link (text escaped)."""
    return format_html('<a href="{}">{}</a>', url, text)


def link_to_checkpoint(checkpoint_id: str) -> str:
    """A link to a checkpoint's admin page, or a dash when there is none."""
    return link(change_url("checkpoint", checkpoint_id), checkpoint_id) if checkpoint_id else "—"


def pretty_json(value: Any) -> str:
    """Readable, indented JSON in a ``<pre>`` block (escaped)."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return format_html('<pre class="pw-json">{}</pre>', text)
