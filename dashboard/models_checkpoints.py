"""Unmanaged, read-only models over the tables of LangGraph's own checkpoint savers.

Django's admin refuses composite primary keys, so ``checkpoint_id`` (a time-ordered
uuid6, unique in practice) stands in as the single primary key. Only the plain columns
are mapped: ``metadata`` is JSON on both databases (jsonb on PostgreSQL, JSON text on
SQLite); the checkpoint body is decoded by the saver itself (``dashboard.checkpoints``).
"""

from __future__ import annotations

from django.db import models


class Checkpoint(models.Model):
    """One row of the saver's ``checkpoints`` table (never written by Django)."""

    checkpoint_id = models.TextField(primary_key=True)
    thread_id = models.TextField()
    checkpoint_ns = models.TextField(blank=True)
    parent_checkpoint_id = models.TextField(null=True, blank=True)  # noqa: DJ001  (saver: NULL)
    type = models.TextField(null=True, blank=True)  # noqa: DJ001  (saver: NULL)
    metadata = models.JSONField(default=dict)

    class Meta:
        managed = False  # the saver's setup() owns this table (migration 0002)
        db_table = "checkpoints"
        ordering = ["-checkpoint_id"]
        default_permissions = ("view",)  # audit only: no add, change or delete permission

    def __str__(self) -> str:
        return f"{self.thread_id} {self.checkpoint_ns or '(root)'} {self.checkpoint_id}"
