"""The ownership matrix (``dashboard.policy``): every route that serves one user's thread,
run, interrupt, checkpoint, export, assistant, cron or store item, for its owner A,
another owner B, a viewer, a user holding only ``delete_run``, and a team operator.

A cell is what the rule says: the owner and the team pass; a user who may read but lacks
the action's permission gets 403; anyone else gets the 404 of an unknown id (or 403 when
they lack the permission too: either refuses without saying more). A list shows A's item
exactly to those who may read it. The pages, ``/api/`` and ``/langgraph/`` are checked
with the same expectations, so they cannot disagree about the same thread.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from dashboard import crons
from dashboard.models import Assistant, Cron, Interrupt, Run, Thread
from tests.support import ownership
from tests.support.ownership import World, call, client_of, expected, passed

pytestmark = [pytest.mark.reliability, pytest.mark.pg]  # the store differs on PostgreSQL

world = ownership.world  # A's run, thread, question, checkpoint, assistant, cron, item


# (method, url, body, the permission it needs or ""); reads first, then acts, then deletes
def routes(w: World) -> list[tuple[str, str, dict | None, str]]:
    r, t, i, a, c = w.run.id, w.thread.id, w.interrupt.pk, w.assistant.id, w.cron.id
    store = {"namespace": [w.space], "key": "secret"}
    return [
        ("get", f"/runs/{r}/", None, ""),
        ("get", f"/runs/{r}/state/?checkpoint={w.checkpoint}", None, ""),
        ("get", f"/runs/{r}/interrupts/", None, ""),
        ("get", f"/runs/{r}/debug/", None, ""),
        ("get", f"/api/runs/{r}/", None, ""),
        ("get", f"/api/runs/{r}/events/", None, ""),
        ("get", f"/api/runs/{r}/export/", None, ""),
        ("get", f"/api/runs/{r}/checkpoints/", None, ""),
        ("get", f"/api/runs/{r}/checkpoints/{w.checkpoint}/", None, ""),
        ("get", f"/api/interrupts/{i}/", None, ""),
        ("get", f"/langgraph/threads/{t}", None, ""),
        ("get", f"/langgraph/threads/{t}/state", None, ""),
        ("get", f"/langgraph/threads/{t}/runs/{r}", None, ""),
        ("get", f"/langgraph/assistants/{a}", None, ""),
        ("post", f"/langgraph/assistants/{a}/versions", {}, ""),
        ("get", f"/langgraph/assistants/{a}/graph", None, ""),
        ("get", f"/langgraph/store/items?namespace={w.space}&key=secret", None, ""),
        # acts and changes
        ("post", f"/api/runs/{r}/breakpoints/", {"interrupt_before": []}, "debug_run"),
        ("post", f"/api/runs/{r}/continue/", {}, "debug_run"),
        ("patch", f"/langgraph/runs/crons/{c}", {"schedule": "0 4 * * *",
                                                  "input": {"steps": 3}}, "start_run"),
        ("patch", f"/langgraph/assistants/{a}", {"name": "taken"}, "start_run"),
        ("post", f"/langgraph/assistants/{a}/latest", {"version": 1}, "start_run"),
        ("put", "/langgraph/store/items", {**store, "value": {"text": "B's"}}, "start_run"),
        ("post", f"/langgraph/threads/{t}/runs/crons", {"assistant_id": "test.echo",
                                                         "schedule": "0 5 * * *"}, "start_run"),
        ("post", f"/api/interrupts/{i}/answer/", {"answer": "Germany"}, "answer_interrupt"),
        ("post", f"/api/runs/{r}/budget/", {"extend": {"max_tokens": 10}}, "cancel_run"),
        ("post", f"/runs/{r}/budget/", {}, "cancel_run"),
        ("post", f"/api/runs/{r}/cancel/", None, "cancel_run"),
        ("post", f"/langgraph/threads/{t}/runs/{r}/cancel", {}, "cancel_run"),
        ("post", f"/runs/{r}/cancel/", {}, "cancel_run"),
        # deletes
        ("delete", "/langgraph/store/items", store, "delete_run"),
        ("delete", f"/langgraph/runs/crons/{c}", None, "delete_run"),
        ("delete", f"/langgraph/assistants/{a}?delete_threads=true", None, "delete_run"),
    ]


def lists(w: World) -> list[tuple[str, str, dict | None, object]]:
    """Listing routes, and what in their answer shows A's item."""
    return [
        ("get", "/", None, str(w.run.id)),
        ("get", "/inbox/", None, str(w.run.id)),
        ("get", "/crons/", None, str(w.cron.id)[:8]),
        ("get", "/api/runs/", None, str(w.run.id)),
        ("get", "/api/interrupts/", None, str(w.run.id)),
        ("post", "/langgraph/threads/search", {}, str(w.thread.id)),
        ("post", "/langgraph/assistants/search", {}, str(w.assistant.id)),
        ("post", "/langgraph/runs/crons/search", {}, str(w.cron.id)),
        ("post", "/langgraph/store/items/search", {"namespace_prefix": [w.space]}, "secret"),
        ("post", "/langgraph/store/namespaces", {"limit": 1000}, w.space),
    ]


@pytest.mark.parametrize("who", ["B", "viewer", "deleter", "team", "A"])
def test_the_ownership_matrix(world, who):
    users, w = world
    client = client_of(users[who])
    wrong = []
    for method, url, data, shows in lists(w):
        response = call(client, method, url, data)
        sees = shows in response.content.decode()
        if response.status_code != 200 or sees != (who in ("A", "team")):
            wrong.append((method, url, response.status_code, f"lists A's: {sees}"))
    for method, url, data, perm in routes(w):
        response = call(client, method, url, data)
        cell = expected(who, perm)
        ok = passed(response) if cell == "ok" else response.status_code in cell
        if not ok:
            wrong.append((method, url, response.status_code, f"expected {cell}"))
    assert wrong == [], "\n".join(map(str, wrong))
    if who not in ("A", "team"):  # and A's resources are as A left them
        w.cron.refresh_from_db()
        assert w.cron.schedule == "0 3 * * *" and w.cron.payload == {"input": {"steps": 1}}
        assert Assistant.objects.get(id=w.assistant.id).name == "A's"
        assert Thread.objects.filter(id=w.thread.id).exists()
        assert Interrupt.objects.get(pk=w.interrupt.pk).status == "pending"
        assert Run.objects.get(id=w.run.id).status == "interrupted"
        item = call(client_of(users["A"]), "get",
                    f"/langgraph/store/items?namespace={w.space}&key=secret", None)
        assert item.json()["value"] == {"text": "A's"}


def test_a_cron_fires_as_its_user_checked_at_each_fire(world, settings):
    """Finding 5: a cron of a user who lost ``start_run``, or was deactivated, starts
    nothing, and says why; given back the permission, it fires again."""
    from datetime import timedelta

    from django.utils import timezone

    users, w = world
    a = users["A"]
    Cron.objects.filter(id=w.cron.id).update(enabled=True, thread=None)
    start_run = Permission.objects.get(codename="start_run")
    for take, give in [(lambda: a.user_permissions.remove(start_run),
                        lambda: a.user_permissions.add(start_run)),
                       (lambda: setattr(a, "is_active", False) or a.save(),
                        lambda: setattr(a, "is_active", True) or a.save())]:
        take()
        Cron.objects.filter(id=w.cron.id).update(next_run_date=timezone.now()
                                                 - timedelta(seconds=1))
        assert crons.cron_fire_due() == []
        w.cron.refresh_from_db()
        assert w.cron.last_error.startswith("skipped: its user 'A'"), w.cron.last_error
        give()
    Cron.objects.filter(id=w.cron.id).update(next_run_date=timezone.now()
                                             - timedelta(seconds=1))
    fired = crons.cron_fire_due()
    assert len(fired) == 1 and fired[0].created_by == a


def test_reserved_config_keys_are_refused_wherever_config_comes_from(world):
    """Finding 6: LangGraph's keys reach no run through an assistant's config: refused at
    its create and update, and a row holding them (from before) fires nothing."""
    users, w = world
    client = client_of(users["A"])
    for key in ("checkpoint_ns", "checkpoint_id", "__pregel_durability"):
        config = {"configurable": {key: "x"}}
        made = call(client, "post", "/langgraph/assistants", {"graph_id": "test.echo",
                                                               "config": config})
        assert made.status_code == 422 and key in made.json()["detail"], made.content
        changed = call(client, "patch", f"/langgraph/assistants/{w.assistant.id}",
                       {"config": config})
        assert changed.status_code == 422 and key in changed.json()["detail"]
    from datetime import timedelta

    from django.utils import timezone

    Assistant.objects.filter(id=w.assistant.id).update(
        config={"configurable": {"checkpoint_ns": "x"}})
    Cron.objects.filter(id=w.cron.id).update(
        assistant_id=str(w.assistant.id), thread=None, enabled=True,
        next_run_date=timezone.now() - timedelta(seconds=1))
    assert crons.cron_fire_due() == []
    w.cron.refresh_from_db()
    assert "checkpoint_ns" in w.cron.last_error
