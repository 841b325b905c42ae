"""Create an API token for a user and print its key once (only its digest is stored)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from dashboard.api.auth import create_token


class Command(BaseCommand):
    """``manage.py create_token <username> [--hours N]``."""

    help = "Create an API token (printed once; stored hashed; expires)."

    def add_arguments(self, parser: Any) -> None:
        """Username and lifetime."""
        parser.add_argument("username")
        parser.add_argument("--hours", type=float, default=None,
                            help="lifetime in hours (default: PLANWATCH_TOKEN_TTL_HOURS)")

    def handle(self, *args: Any, username: str, hours: float | None, **options: Any) -> None:
        """Create the token; the key cannot be shown again."""
        User = get_user_model()
        try:
            user = User.objects.get(**{User.USERNAME_FIELD: username})
        except User.DoesNotExist:
            raise CommandError(f"no user {username!r}; create one in the admin first") from None
        self.stdout.write(create_token(user, hours=hours))
        self.stderr.write("Keep it now: it is stored only as a digest and cannot be shown again.")
