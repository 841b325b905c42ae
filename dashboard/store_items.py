"""Services of the store's items (LangGraph's ``BaseStore``, ``/langgraph/store``): who
wrote an item through the API (:class:`~dashboard.models.StoreOwner`) and who may read or
change it (:mod:`dashboard.policy`); the store itself is :mod:`dashboard.runs.langgraph_store`.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404

from dashboard import policy
from dashboard.models import StoreItem, StoreOwner
from dashboard.runs.langgraph_store import open_store
from dashboard.services import User


def _item(item: Any) -> dict[str, Any]:
    """A store ``Item`` (or ``SearchItem``) as LangGraph's server shapes it."""
    shaped = {"namespace": list(item.namespace), "key": item.key, "value": item.value,
              "created_at": item.created_at.isoformat(), "updated_at": item.updated_at.isoformat()}
    if getattr(item, "score", None) is not None:
        shaped["score"] = item.score
    return shaped


def _owner_of(namespace: tuple[str, ...], key: str) -> int | None:
    """The user who wrote an item through the API (None: a graph wrote it, or nobody)."""
    return StoreOwner.objects.filter(prefix=".".join(namespace), key=key).values_list(
        "user_id", flat=True).first()


def _hidden(namespace: tuple[str, ...], key: str) -> Http404:
    return Http404(f"no item {key!r} in namespace {list(namespace)}")


def store_put(*, user: User, namespace: tuple[str, ...], key: str, value: dict[str, Any],
              ttl: float | None = None) -> None:
    """Write one item (``ttl`` in minutes; none: kept until deleted); a new item is
    ``user``'s. Another user's item is not found (a graph's is shared)."""
    owner = _owner_of(namespace, key)
    if not policy.may_change_item(user, owner):
        raise _hidden(namespace, key)
    with open_store() as store:
        new = owner is None and store.get(namespace, key) is None
        store.put(namespace, key, value, ttl=ttl)
    if new and user.is_authenticated:
        StoreOwner.objects.get_or_create(prefix=".".join(namespace), key=key,
                                         defaults={"user": user})


def store_get(*, user: User, namespace: tuple[str, ...], key: str,
              refresh_ttl: bool | None = None) -> dict[str, Any] | None:
    """One item ``user`` may read, or None."""
    if not policy.may_read_item(user, _owner_of(namespace, key)):
        return None
    with open_store() as store:
        item = store.get(namespace, key, refresh_ttl=refresh_ttl)
    return _item(item) if item is not None else None


def store_delete(*, user: User, namespace: tuple[str, ...], key: str) -> None:
    """Delete one item ``user`` may change (nothing happens for one that does not exist)."""
    if not policy.may_change_item(user, _owner_of(namespace, key)):
        raise _hidden(namespace, key)
    with open_store() as store:
        store.delete(namespace, key)
    StoreOwner.objects.filter(prefix=".".join(namespace), key=key).delete()


def _others_items(user: User) -> set[tuple[str, str]]:
    """(prefix, key) of the items ``user`` may not read (none for the team)."""
    if policy.is_team(user):
        return set()
    return set(StoreOwner.objects.exclude(user_id=getattr(user, "pk", None) or 0).values_list(
        "prefix", "key"))


def store_search(*, user: User, namespace_prefix: tuple[str, ...],
                 filter: dict[str, Any] | None, limit: int, offset: int,
                 query: str | None = None, refresh_ttl: bool | None = None
                 ) -> list[dict[str, Any]]:
    """Items ``user`` may read under a namespace prefix whose values match ``filter``
    (``query`` ranks only with an embedding index; none is configured, so it is ignored).
    ``offset`` and ``limit`` count the readable items only."""
    hidden = _others_items(user)
    shown: list[Any] = []
    skipped, at, batch = 0, 0, max(limit + offset, 100)
    with open_store() as store:
        while len(shown) < limit:
            found = store.search(namespace_prefix, filter=filter, limit=batch, offset=at,
                                 refresh_ttl=refresh_ttl)
            at += len(found)
            for item in found:
                if (".".join(item.namespace), item.key) in hidden:
                    continue
                if skipped < offset:
                    skipped += 1
                elif len(shown) < limit:
                    shown.append(item)
            if len(found) < batch:
                break
    return [_item(i) for i in shown]


def store_namespaces(*, user: User, prefix: tuple[str, ...] | None,
                     suffix: tuple[str, ...] | None, max_depth: int | None, limit: int,
                     offset: int) -> list[list[str]]:
    """The namespaces holding items ``user`` may read, filtered and truncated as
    LangGraph's store does."""
    with open_store() as store:
        if policy.is_team(user):
            found = store.list_namespaces(prefix=prefix, suffix=suffix, max_depth=max_depth,
                                          limit=limit, offset=offset)
            return [list(ns) for ns in found]
        hidden = _others_items(user)
        found, at, batch = [], 0, 1000
        while True:  # every full namespace, then the readable ones truncated and paged
            page = store.list_namespaces(prefix=prefix, suffix=suffix, limit=batch, offset=at)
            found += page
            at += len(page)
            if len(page) < batch:
                break
        readable = StoreItem.objects.filter(prefix__in=[".".join(ns) for ns in found])
        prefixes = {p for p, k in readable.values_list("prefix", "key") if (p, k) not in hidden}
    shown = sorted({tuple(ns[:max_depth] if max_depth else ns) for ns in found
                    if ".".join(ns) in prefixes})
    return [list(ns) for ns in shown[offset: offset + limit]]
