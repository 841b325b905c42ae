"""One JSON object a line for every log record (``PLANWATCH_LOG_FORMAT=json``).

The standard library's ``logging.Formatter`` with the record's time, level, logger and
message, plus every field a caller passed in ``extra`` (``run_id``, ``status``, ``path``…),
so a log pipeline can index them without parsing the message.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message", "asctime", "taskName"}
"""A record's own attributes: everything else on it came from ``extra``."""


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON: time, level, logger, message, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        """The line."""
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        line.update({key: value for key, value in vars(record).items() if key not in STANDARD})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)
