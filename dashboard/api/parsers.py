"""JSON bodies bounded by ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (DRF's own parser reads any size)."""

from __future__ import annotations

import io
from typing import Any

from django.conf import settings
from rest_framework.parsers import JSONParser

from dashboard.api.exceptions import RequestTooLarge


class BoundedJSONParser(JSONParser):
    """Refuse, with a 413, a JSON body larger than Django's upload limit before parsing it."""

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: dict[str, Any] | None = None) -> Any:
        """Read at most the limit plus one byte; more than the limit is an error."""
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None:
            request = (parser_context or {}).get("request")
            declared = _content_length(request)
            body = stream.read(limit + 1)
            if declared > limit or len(body) > limit:
                raise RequestTooLarge(
                    f"request body is {max(declared, len(body)):,} bytes; the limit is "
                    f"{limit:,} (DATA_UPLOAD_MAX_MEMORY_SIZE). Send less data."
                )
            stream = io.BytesIO(body)
        return super().parse(stream, media_type, parser_context)


def _content_length(request: Any) -> int:
    meta = getattr(request, "META", {}) if request is not None else {}
    try:
        return int(meta.get("CONTENT_LENGTH") or 0)
    except (TypeError, ValueError):
        return 0
