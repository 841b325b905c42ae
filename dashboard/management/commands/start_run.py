"""Start a run of a registered graph from the command line, and optionally follow it."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from dashboard import services
from dashboard.models import Run
from dashboard.runs.follow import follow, settled


class Command(BaseCommand):
    """``manage.py start_run GRAPH --input JSON [--follow] [--user NAME]``."""

    help = (
        "Start a run of GRAPH with --input (a JSON object) and print its id. With --follow, "
        "print its events until it finishes or waits for an answer. Without a worker "
        "(PLANWATCH_EXECUTOR=inprocess) this process executes the run until it stops."
    )

    def add_arguments(self, parser: Any) -> None:
        """Accept the graph, its input, --follow and --user."""
        parser.add_argument("graph")
        parser.add_argument("--input", default="{}", help="the start input as a JSON object")
        parser.add_argument("--follow", action="store_true", help="print events as they come")
        parser.add_argument("--user", default="", help="username recorded as the run's creator")

    def handle(self, *args: Any, graph: str, input: str, follow: bool, user: str,
               **options: Any) -> None:
        """Parse, call ``run_create``, then follow the event log."""
        try:
            values = json.loads(input)
        except json.JSONDecodeError as exc:
            raise CommandError(f"--input is not valid JSON ({exc}); pass an object like "
                               "'{\"goal\": \"...\"}'") from None
        if not isinstance(values, dict):
            raise CommandError(f"--input must be a JSON object, not {type(values).__name__}")
        creator = None
        if user:
            creator = get_user_model().objects.filter(username=user).first()
            if creator is None:
                raise CommandError(f"no user {user!r}; create it or leave out --user")
        try:
            run = services.run_create(graph=graph, input=values, user=creator)
        except services.ServiceError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(str(run.id))
        if follow or settings.PLANWATCH["EXECUTOR"] == "inprocess":
            self._follow(run, echo=follow)

    def _follow(self, run: Run, *, echo: bool) -> None:
        last = async_to_sync(self._afollow)(run, echo=echo)
        if echo and last is not None:
            self.stdout.write(f"run {last.id} {last.status}")
            if last.status == Run.Status.SUCCEEDED:
                self.stdout.write(json.dumps(last.output, indent=2))
            elif last.error_message:
                self.stdout.write(last.error_message)

    async def _afollow(self, run: Run, *, echo: bool) -> Run | None:
        """Print the run's events until it neither executes nor waits to; the run as last read."""
        last = None
        async for step in follow(run.id, 0, until=settled):
            last = step.run or last
            if echo:
                for event in step.events:
                    self.stdout.write(format_event(event))
        return last


def format_event(event: dict[str, Any]) -> str:
    """One event (``event_dict`` form) as a terminal line."""
    parts = [f"#{event['seq']:<5}", f"{event['kind']:<18}", event["node"] or "-"]
    if event["namespace"]:
        parts.append(f"[{event['namespace']}]")
    if event["step"] is not None:
        parts.append(f"step {event['step']}")
    if event["duration_ms"] is not None:
        parts.append(f"{event['duration_ms']:.1f} ms")
    return "  ".join(parts)
