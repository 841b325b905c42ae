"""LocalCorpusSearch: the shipped corpus, matching, no hits, and failure on demand."""

from __future__ import annotations

import json

import pytest

from planner.search import DEFAULT_CORPUS, LocalCorpusSearch, SearchError, SearchHit


async def test_finds_a_regions_population_in_the_shipped_corpus() -> None:
    hits = await LocalCorpusSearch().asearch("Germany population 2024")
    assert hits[0] == SearchHit(
        title="Germany: population 2024",
        snippet="Germany had about 84.5 million inhabitants at the end of 2024.",
        source="local-corpus://statistics/de-population-2024",
        field="market.population", value=84_500_000,
    )
    assert all(h.field == "market.population" for h in hits)


async def test_multi_word_regions_and_aliases_match_only_their_region() -> None:
    search = LocalCorpusSearch()
    us = await search.asearch("budgeting app adoption rate in the United States")
    uk = await search.asearch("UK budgeting app users share")
    assert [h.value for h in us] == [0.28]
    assert [h.value for h in uk] == [0.24]


async def test_codes_match_only_in_capitals() -> None:
    search = LocalCorpusSearch()
    assert [h.value for h in await search.asearch("population of US")] == [335_000_000]
    assert await search.asearch("population figures for us") == []


async def test_field_narrows_the_hits() -> None:
    hits = await LocalCorpusSearch().asearch("Germany budgeting app price adoption",
                                             field="market.price")
    assert [h.field for h in hits] == ["market.price"]


@pytest.mark.parametrize("query", ["India budgeting app adoption rate", "population",
                                   "Atlantis population", "Germany weather"])
async def test_returns_no_hits_when_nothing_matches(query: str) -> None:
    assert await LocalCorpusSearch().asearch(query) == []


async def test_can_be_told_to_fail_everything() -> None:
    with pytest.raises(SearchError, match="'Germany population 2024'"):
        await LocalCorpusSearch(fail=True).asearch("Germany population 2024")


async def test_can_fail_or_go_empty_for_chosen_fields_and_queries() -> None:
    search = LocalCorpusSearch(fail_fields={"market.population"},
                               fail_queries={"France Population 2024"},
                               empty_queries={"japan population 2024"})
    with pytest.raises(SearchError):
        await search.asearch("Germany population 2024", field="market.population")
    with pytest.raises(SearchError):
        await search.asearch("france population, 2024")
    assert await search.asearch("Japan population 2024") == []
    assert await search.asearch("Brazil population 2024")
    assert len(search.calls) == 4


async def test_custom_documents_replace_the_corpus() -> None:
    docs = [{"id": "x", "region": "DE", "field": "f", "value": 1, "title": "Widgets",
             "keywords": ["widgets"]}]
    search = LocalCorpusSearch(documents=docs)
    assert [h.title for h in await search.asearch("Germany widgets")] == ["Widgets"]
    assert await search.asearch("Germany population") == []


def test_shipped_corpus_is_consistent() -> None:
    data = json.loads(DEFAULT_CORPUS.read_text())
    codes = {r["code"] for r in data["regions"]}
    assert len(codes) >= 5
    for doc in data["documents"]:
        # a document names a known region, or none at all (background, no field value)
        assert doc["region"] in codes or doc["region"] is doc["field"] is doc["value"] is None
        assert {"id", "field", "value", "title", "snippet", "source", "keywords"} <= set(doc)
    rates = [d["value"] for d in data["documents"] if d["field"] == "market.adoption_rate"]
    assert all(0 < r < 1 for r in rates)


def test_unreadable_corpus_is_a_search_error(tmp_path) -> None:
    bad = tmp_path / "corpus.json"
    bad.write_text("{not json")
    with pytest.raises(SearchError, match="cannot read search corpus"):
        LocalCorpusSearch(path=bad)
