"""Delete what is older than N days: finished runs, their events and checkpoints, texts."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from dashboard.retention import runs_prune


class Command(BaseCommand):
    """``manage.py prune --older-than DAYS [--keep-audit]``."""

    help = ("Delete finished runs older than DAYS with their events, questions and "
            "checkpoints, threads left empty, and the model-call texts of kept runs older "
            "than that. --keep-audit keeps each run's row, its questions and answers and "
            "its lifecycle events.")

    def add_arguments(self, parser: Any) -> None:
        """Accept the age and whether to keep the audit trail."""
        parser.add_argument("--older-than", type=float, required=True, metavar="DAYS")
        parser.add_argument("--keep-audit", action="store_true")

    def handle(self, *args: Any, older_than: float, keep_audit: bool, **options: Any) -> None:
        """Prune and say what went."""
        if older_than <= 0:
            raise CommandError(f"--older-than {older_than:g}: give a number of days above 0")
        pruned = runs_prune(older_than=timedelta(days=older_than), keep_audit=keep_audit)
        self.stdout.write(
            f"pruned {pruned.runs} runs ({pruned.events} events, {pruned.checkpoint_threads} "
            f"checkpoint threads{', audit kept' if keep_audit else ''}), {pruned.threads} "
            f"empty threads, and the texts of {pruned.model_texts} model-call events")
