"""The search port: a local corpus by default; able to return no hits and to fail."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

DEFAULT_CORPUS = Path(__file__).parent / "data" / "market_corpus.json"
"""The corpus shipped as package data (a few regions' market facts)."""

_TOKEN = re.compile(r"[a-z0-9]+")


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


@cache
def load_corpus(path: Path = DEFAULT_CORPUS) -> dict[str, Any]:
    """Read a corpus file: ``{"regions": [...], "documents": [...]}`` (cached per path)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SearchError(f"cannot read search corpus {str(path)!r}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("documents"), list):
        raise SearchError(f"search corpus {str(path)!r} needs a 'documents' list")
    return data


def corpus_regions(path: Path = DEFAULT_CORPUS) -> list[dict[str, Any]]:
    """The regions a corpus knows: ``[{"code", "name", "currency", "aliases"}, ...]``."""
    return list(load_corpus(path).get("regions", []))


def tokens(text: str) -> list[str]:
    """Lower-case word tokens of ``text`` (how queries and documents are compared)."""
    return _TOKEN.findall(text.lower())


class LocalCorpusSearch:
    """Keyword search over a small JSON corpus: offline, deterministic, fallible on demand.

    A document matches when the query names its region (name, code or alias) and shares
    at least one keyword with it; ``field`` narrows hits to one field. For tests, ``fail``
    makes every call raise ``SearchError``, ``fail_fields``/``fail_queries`` make only those
    fail, and ``empty_fields``/``empty_queries`` make those return no hits.
    """

    def __init__(
        self,
        *,
        path: Path | str | None = None,
        documents: Iterable[Mapping[str, Any]] | None = None,
        regions: Iterable[Mapping[str, Any]] | None = None,
        fail: bool = False,
        fail_fields: Iterable[str] = (),
        fail_queries: Iterable[str] = (),
        empty_fields: Iterable[str] = (),
        empty_queries: Iterable[str] = (),
    ) -> None:
        corpus = load_corpus(Path(path)) if path else load_corpus()
        self.documents = [dict(d) for d in (documents if documents is not None
                                            else corpus["documents"])]
        self.regions = [dict(r) for r in (regions if regions is not None
                                          else corpus.get("regions", []))]
        self.fail = fail
        self.fail_fields = frozenset(fail_fields)
        self.fail_queries = frozenset(_norm(q) for q in fail_queries)
        self.empty_fields = frozenset(empty_fields)
        self.empty_queries = frozenset(_norm(q) for q in empty_queries)
        self.calls: list[tuple[str, str | None]] = []
        self._region_names = {
            r["code"]: [r["name"], *r.get("aliases", [])] for r in self.regions
        }

    async def asearch(self, query: str, *, field: str | None = None) -> list[SearchHit]:
        """Return the documents matching ``query`` (best first); raise ``SearchError``."""
        self.calls.append((query, field))
        if self.fail or field in self.fail_fields or _norm(query) in self.fail_queries:
            raise SearchError(
                f"search backend unavailable for query {query!r} (LocalCorpusSearch was "
                "configured to fail; construct it without fail options for real results)"
            )
        if field in self.empty_fields or _norm(query) in self.empty_queries:
            return []
        words = set(tokens(query))
        named = {code for code, names in self._region_names.items()
                 if _region_named(code, names, query)}
        scored: list[tuple[int, str, dict[str, Any]]] = []
        for doc in self.documents:
            if field is not None and doc.get("field") != field:
                continue
            if doc.get("region") and doc["region"] not in named:
                continue
            keywords = {k.lower() for k in doc.get("keywords", [])} | set(tokens(doc["title"]))
            region_words = {w for n in self._region_names.get(doc.get("region", ""), [])
                            for w in tokens(n)}
            score = len((words & keywords) - region_words)
            if score:
                scored.append((-score, str(doc.get("id", "")), doc))
        scored.sort(key=lambda item: item[:2])
        return [
            SearchHit(
                title=doc["title"], snippet=doc.get("snippet", ""), source=doc.get("source", ""),
                field=doc.get("field"), value=doc.get("value"),
            )
            for _, _, doc in scored
        ]


def _norm(query: str) -> str:
    return " ".join(tokens(query))


def _region_named(code: str, names: list[str], query: str) -> bool:
    # names match as whole phrases ("united states"), codes only in capitals ("US", not "us")
    normalized = f" {_norm(query)} "
    if any(f" {_norm(name)} " in normalized for name in names if _norm(name)):
        return True
    return re.search(rf"\b{re.escape(code.upper())}\b", query) is not None


def default_search() -> SearchPort:
    """The search port graphs get by default: the local corpus."""
    return LocalCorpusSearch()
