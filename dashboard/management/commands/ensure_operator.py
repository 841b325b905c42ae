"""Create the first operator if no user exists (password from the environment or generated)."""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    """``manage.py ensure_operator [--username admin]``."""

    help = (
        "Create the first operator (a superuser) when there is no user at all. The password "
        "comes from PLANWATCH_ADMIN_PASSWORD, otherwise it is generated and printed once."
    )

    def add_arguments(self, parser: Any) -> None:
        """Accept the username to create."""
        parser.add_argument("--username", default=os.environ.get("PLANWATCH_ADMIN_USER", "admin"))

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        """Create the operator, or say why nothing was done."""
        users = get_user_model()
        if users.objects.exists():
            self.stdout.write("Operators exist already; none created.")
            return
        password = os.environ.get("PLANWATCH_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        users.objects.create_superuser(username=username, email="", password=password)
        if os.environ.get("PLANWATCH_ADMIN_PASSWORD"):
            self.stdout.write(self.style.SUCCESS(
                f"Created operator {username!r} with the password from PLANWATCH_ADMIN_PASSWORD."
            ))
        else:
            self.stdout.write(self.style.SUCCESS(
                f"Created operator {username!r} with password: {password}\n"
                "It is shown only this once; change it in the admin or set "
                "PLANWATCH_ADMIN_PASSWORD before the first start."
            ))
