"""``GET /assistants/<id>/subgraphs`` through the official SDK, as LangGraph's server
answers it: subgraphs by namespace with their schemas, nested ones with ``recurse``."""

from __future__ import annotations

import pytest
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_graph_with_a_subgraph_lists_it_with_its_schemas(sdk):
    found = sdk.assistants.get_subgraphs("nested")
    assert list(found) == ["child"]
    assert set(found["child"]["input_schema"]["properties"]) == {"count", "limit"}
    assert {"input_schema", "output_schema", "state_schema", "config_schema",
            "context_schema"} <= set(found["child"])


def test_nested_subgraphs_are_listed_with_recurse_only(sdk):
    assert list(sdk.assistants.get_subgraphs("deep")) == ["middle"]
    assert list(sdk.assistants.get_subgraphs("deep", recurse=True)) == [
        "middle", "middle|child"]


def test_a_namespace_narrows_the_answer_to_that_subgraph(sdk):
    assert list(sdk.assistants.get_subgraphs("deep", namespace="middle")) == ["middle"]
    assert sdk.assistants.get_subgraphs("deep", namespace="elsewhere") == {}


def test_a_graph_without_subgraphs_has_none(sdk):
    assert sdk.assistants.get_subgraphs("orders", recurse=True) == {}
    assert sdk.assistants.get_subgraphs("acquisition", recurse=True) == {}


def test_an_assistant_of_a_graph_with_subgraphs_lists_its_graphs(sdk):
    made = sdk.assistants.create("deep", name="deep helper")
    assert list(sdk.assistants.get_subgraphs(made["assistant_id"], recurse=True)) == [
        "middle", "middle|child"]


def test_unknown_assistant_is_404_and_a_bad_recurse_422(sdk):
    with pytest.raises(NotFoundError):
        sdk.assistants.get_subgraphs("nope")
    with pytest.raises(UnprocessableEntityError, match="recurse"):
        sdk.assistants.get_subgraphs("deep", params={"recurse": "maybe"})
