"""Assistants, their versions and crons of LangGraph's server API (``/langgraph/``).

A registered graph's own assistant (its id is the graph's name) is not a row: it is the
registry's. An assistant a client creates is a row with a UUID, a graph and its own
``config``/``context``; each update writes a new :class:`AssistantVersion` and the
assistant shows the version it points at. A :class:`Cron` is a run request kept with a
schedule; the executors' scheduler starts it through the run service when it is due.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class Assistant(models.Model):
    """A graph with a config and context of its own (LangGraph's ``Assistant``)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    graph = models.CharField(max_length=100, db_index=True, help_text="Its graph_id.")
    name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    config = models.JSONField(default=dict, blank=True)
    context = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    version = models.PositiveIntegerField(default=1, help_text="The version it points at.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_by_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name or self.id} ({self.graph} v{self.version})"


class AssistantVersion(models.Model):
    """One version of an assistant: what it was after a create or an update."""

    assistant = models.ForeignKey(Assistant, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    graph = models.CharField(max_length=100)
    name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    config = models.JSONField(default=dict, blank=True)
    context = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-version"]
        constraints = [models.UniqueConstraint(fields=["assistant", "version"],
                                               name="assistant_version_unique")]

    def __str__(self) -> str:
        return f"{self.assistant_id} v{self.version}"


class Cron(models.Model):
    """A run request started on a schedule (LangGraph's ``Cron``)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    assistant_id = models.CharField(max_length=100,
                                    help_text="A graph's name or an assistant's UUID.")
    thread = models.ForeignKey("dashboard.Thread", null=True, blank=True,
                               on_delete=models.CASCADE, related_name="crons",
                               help_text="Runs go on this thread; none: a new one each time.")
    schedule = models.CharField(max_length=100, help_text="A cron expression (UTC).")
    payload = models.JSONField(default=dict, blank=True,
                               help_text="The run request each run is started with.")
    metadata = models.JSONField(default=dict, blank=True)
    next_run_date = models.DateTimeField(null=True, blank=True, db_index=True)
    end_time = models.DateTimeField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    last_run_date = models.DateTimeField(null=True, blank=True)
    last_run = models.ForeignKey("dashboard.Run", null=True, blank=True,
                                 on_delete=models.SET_NULL, related_name="+")
    last_error = models.TextField(blank=True)
    broken_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When its next time could not be computed; skipped until its schedule "
                  "changes (last_error says why).")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["enabled", "next_run_date"], name="cron_due")]
        constraints = [models.CheckConstraint(condition=~Q(schedule=""),
                                              name="cron_schedule_set")]

    def __str__(self) -> str:
        return f"cron {str(self.id)[:8]} {self.schedule!r} → {self.assistant_id}"


class StoreItem(models.Model):
    """One item of LangGraph's store (its ``store`` table; never written by Django).

    The table's key is (prefix, key); the admin needs one column, so ``key`` stands in
    (the admin only lists items, with no page per item).
    """

    key = models.TextField(primary_key=True)
    prefix = models.TextField(help_text="The namespace, its labels joined by '.'.")
    value = models.JSONField(default=dict)
    created_at = models.DateTimeField(null=True)
    updated_at = models.DateTimeField(null=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    ttl_minutes = models.FloatField(null=True, blank=True)

    class Meta:
        managed = False  # the store's setup() owns this table (migration 0014)
        db_table = "store"
        ordering = ["prefix", "key"]
        default_permissions = ("view",)  # read-only: no add, change or delete permission

    def __str__(self) -> str:
        return f"{self.prefix}/{self.key}"


class StoreOwner(models.Model):
    """Who wrote a store item through ``/langgraph/store`` (the store's own table has no
    owner column): the item is theirs to read, change and delete (``dashboard.policy``).
    An item with no row here was written by a graph inside a run and is the team's."""

    prefix = models.TextField(help_text="The item's namespace, its labels joined by '.'.")
    key = models.TextField()
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["prefix", "key"],
                                               name="store_owner_item_unique")]

    def __str__(self) -> str:
        return f"{self.prefix}/{self.key} ({self.user_id})"
