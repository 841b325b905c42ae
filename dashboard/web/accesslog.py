"""daphne's access log without secrets: credentials in a query string are redacted.

A client that sends its token in the address (``?token=…``, ``?api_key=…``) is refused,
but daphne would still write the address, token included, to its access log. The server
``manage.py serve`` runs redacts such values before anything is logged.
"""

from __future__ import annotations

import re
from typing import Any

from daphne.server import Server

SECRET_NAMES = re.compile(r"token|key|secret|password|passwd|auth|session|sig|credential",
                          re.IGNORECASE)
_PAIR = re.compile(r"([^&=?#]+)=([^&#]*)")


def redact(path: str) -> str:
    """``path`` with the value of every query parameter that may hold a secret replaced."""
    head, sep, query = path.partition("?")
    if not sep:
        return path
    return head + sep + _PAIR.sub(
        lambda m: f"{m.group(1)}=[redacted]" if SECRET_NAMES.search(m.group(1)) else m.group(0),
        query)


class RedactingServer(Server):  # type: ignore[misc]  # daphne is untyped
    """daphne's server, logging every action with secrets redacted from its path."""

    def log_action(self, protocol: str, action: str, details: dict[str, Any]) -> None:
        """Redact, then log as daphne does."""
        if isinstance(details.get("path"), str):
            details = {**details, "path": redact(details["path"])}
        super().log_action(protocol, action, details)
