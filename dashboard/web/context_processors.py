"""Template context shared by every page: the navigation's pending-interrupt badge."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from dashboard import selectors


def navigation(request: HttpRequest) -> dict[str, Any]:
    """The inbox count for signed-in users (computed lazily, only if a template uses it)."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    user = request.user
    return {"pending_interrupts": lambda: selectors.interrupts_pending_count(user=user)}
