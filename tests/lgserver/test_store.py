"""LangGraph's store through the official SDK: what graphs write with ``get_store()`` is
what ``/store`` serves, with search, namespaces and TTLs."""

from __future__ import annotations

import pytest
from langgraph_sdk.errors import NotFoundError, PermissionDeniedError, UnprocessableEntityError

from tests.conftest import api_token

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


def test_memories_a_graph_stores_are_served_and_the_graph_reads_the_served_ones(sdk):
    sdk.runs.wait(None, "agent", input={"remember": "likes tea"}, context={"user": "ann"})
    found = sdk.store.search_items(["memories", "ann"])["items"]
    assert [(i["namespace"], i["key"], i["value"]) for i in found] == [
        (["memories", "ann"], "likes tea", {"text": "likes tea"})]
    sdk.store.put_item(["memories", "ann"], "k2", {"text": "hates coffee"})
    out = sdk.runs.wait(None, "agent", input={}, context={"user": "ann"})
    assert out["memories"] == ["hates coffee", "likes tea"]


def test_put_get_search_filter_namespaces_ttl_and_delete(sdk):
    sdk.store.put_item(["docs", "u1"], "a", {"kind": "note", "n": 1})
    sdk.store.put_item(["docs", "u1"], "b", {"kind": "todo", "n": 2}, ttl=30)
    sdk.store.put_item(["docs", "u2", "x"], "c", {"kind": "note", "n": 3})
    item = sdk.store.get_item(["docs", "u1"], "a")
    assert item["value"] == {"kind": "note", "n": 1} and item["namespace"] == ["docs", "u1"]
    notes = sdk.store.search_items(["docs"], filter={"kind": "note"}, limit=10)["items"]
    assert sorted(i["key"] for i in notes) == ["a", "c"]
    assert len(sdk.store.search_items(["docs"], limit=1, offset=1)["items"]) == 1
    spaces = sdk.store.list_namespaces(prefix=["docs"])["namespaces"]
    assert sorted(spaces) == [["docs", "u1"], ["docs", "u2", "x"]]
    assert sdk.store.list_namespaces(prefix=["docs"], max_depth=2)["namespaces"] == [
        ["docs", "u1"], ["docs", "u2"]] or sorted(
        sdk.store.list_namespaces(prefix=["docs"], max_depth=2)["namespaces"]) == [
        ["docs", "u1"], ["docs", "u2"]]
    assert sdk.store.get_item(["docs", "u1"], "b", refresh_ttl=True)["key"] == "b"
    sdk.store.delete_item(["docs", "u1"], "a")
    with pytest.raises(NotFoundError, match="no item 'a'"):
        sdk.store.get_item(["docs", "u1"], "a")


def test_bad_store_requests_name_the_field_and_viewers_only_read(sdk, lg_url, viewer):
    from langgraph_sdk import get_sync_client

    sdk.store.put_item(["team"], "k", {"v": 1})
    with pytest.raises(UnprocessableEntityError, match="value"):
        sdk.http.put("/store/items", json={"namespace": ["team"], "key": "k", "value": 3})
    with pytest.raises(UnprocessableEntityError, match="namespace"):
        sdk.http.put("/store/items", json={"namespace": "team", "key": "k", "value": {}})
    with pytest.raises(UnprocessableEntityError, match="ttl"):
        sdk.store.put_item(["team"], "k", {"v": 1}, ttl=-5)
    with pytest.raises(UnprocessableEntityError, match="max_depth"):
        sdk.http.post("/store/namespaces", json={"max_depth": "deep"})
    looker = get_sync_client(url=lg_url, api_key=api_token(viewer))
    assert looker.store.get_item(["team"], "k")["value"] == {"v": 1}
    with pytest.raises(PermissionDeniedError, match=r"dashboard\.start_run"):
        looker.store.put_item(["team"], "k", {"v": 2})
    with pytest.raises(PermissionDeniedError, match=r"dashboard\.delete_run"):
        looker.store.delete_item(["team"], "k")


def test_the_admin_lists_store_items_read_only(sdk, django_user_model):
    from django.test import Client

    sdk.store.put_item(["audit", "u9"], "seen", {"text": "visible in the admin"})
    staff = django_user_model.objects.create_superuser("root", password="pw-root-12345")
    web = Client()
    web.force_login(staff)
    page = web.get("/admin/dashboard/storeitem/?q=audit").content.decode()
    assert "audit.u9" in page and "visible in the admin" in page
    assert web.get("/admin/dashboard/storeitem/add/").status_code == 403
