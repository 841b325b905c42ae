"""daphne's access log without secrets: credentials in a query string are redacted.

A client that sends its token in the address (``?token=…``, ``?api_key=…``) is refused,
but daphne would still write the address, token included, to its access log. The server
``manage.py serve`` runs redacts such values before anything is logged.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from daphne.server import Server
from django.conf import settings

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


_RUN_ID = re.compile(r"/runs/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")

requests_log = logging.getLogger("planwatch.requests")


def log_request(protocol: str, action: str, details: dict[str, Any]) -> None:
    """One record (``planwatch.requests``, INFO) per finished HTTP request and per websocket
    connect or disconnect, with the run id its path names."""
    if not (protocol == "http" and action == "complete") and not (
            protocol == "websocket" and action in ("connected", "disconnected", "rejected")):
        return
    path = str(details.get("path", ""))
    extra: dict[str, Any] = {"protocol": protocol, "action": action, "path": path,
                             "client": details.get("client")}
    if protocol == "http":
        extra.update(method=details.get("method"), status=details.get("status"),
                     size=details.get("size"))
    if found := _RUN_ID.search(path):
        extra["run_id"] = found.group(1)
    requests_log.info("%s %s %s", extra.get("method") or action, path,
                      extra.get("status") or "", extra=extra)


class RedactingServer(Server):  # type: ignore[misc]  # daphne is untyped
    """daphne's server, logging every action with secrets redacted from its path (as one
    JSON line under ``PLANWATCH_LOG_FORMAT=json``, else as daphne's access log)."""

    def log_action(self, protocol: str, action: str, details: dict[str, Any]) -> None:
        """Redact, then log as daphne does, or as a record of ``planwatch.requests``."""
        if isinstance(details.get("path"), str):
            details = {**details, "path": redact(details["path"])}
        if settings.LOG_FORMAT == "json":
            log_request(protocol, action, details)
            return
        super().log_action(protocol, action, details)
