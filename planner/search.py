"""The search port: a local corpus by default; able to return no hits and to fail."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class SearchError(Exception):
    """The search backend failed (the graph treats it like no hits and moves on)."""


@dataclass(frozen=True)
class SearchHit:
    """One search result: where it came from and the value it states."""

    title: str
    snippet: str
    source: str
    field: str | None = None
    value: float | str | None = None


class SearchPort(Protocol):
    """What a planner graph needs from a search backend."""

    async def asearch(self, query: str, *, field: str | None = None) -> list[SearchHit]:
        """Return hits for ``query`` (possibly none); raise ``SearchError`` on failure."""
        ...


# The local corpus implementation (``LocalCorpusSearch``) is written with the
# field-acquisition planner (issue 3).
