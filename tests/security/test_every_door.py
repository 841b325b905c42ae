"""Every door, one rule: each URL pattern of the project (the resolver's own list, walked
recursively: the pages, ``/api/``, ``/langgraph/``, the admin) and each websocket route has
a case in :data:`DOORS`, and with two owners A and B, B neither reads nor changes A's
objects through it, nor sees them listed; A passes the same door (so a case cannot pass by
asking the wrong address). A route without a case fails :func:`test_every_route_has_a_case`:
a new door is added to the table, with who may pass it.

The kinds of case:

- ``owned``: the door serves or changes one of A's objects; B gets the 404 of an unknown id
  (403 where B lacks the permission), A gets past the rule (:func:`passed`).
- ``list``: the door lists; A's answer shows A's object, B's never does.
- ``none``: the door serves no one's object (a page with no data of A's, a schema, sign-in);
  B's answer names none of A's objects.
- ``staff``: the admin: a user who is not staff is sent to its sign-in.

For every door, B's answer never holds an id of A's that B's request did not name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from dashboard.models import Assistant, Cron, Interrupt, Notice, Run, Thread
from dashboard.notices import notice_token
from tests.dashboard.inbox_support import REGION, waiting
from tests.support import ownership
from tests.support.ownership import World, call, client_of, passed

pytestmark = [pytest.mark.reliability, pytest.mark.pg]  # the store differs on PostgreSQL

world = ownership.world  # A's run, thread, question, checkpoint, assistant, cron, item


@dataclass(frozen=True)
class Door:
    """One request through a door: ``{r}`` … in ``url`` and ``body`` name A's objects."""

    kind: str  # owned | list | none | staff
    method: str = "get"
    url: str = ""
    body: dict | None = None
    perm: str = ""  # the permission the act needs ("": reading)
    shows: str = ""  # list: what in the answer shows A's object ({r} …)
    form: bool = False  # a page's form (form-encoded), not JSON
    refused: tuple[int, ...] = (403, 404)  # what refuses B (409: the id is taken)
    missing: str = ""  # a 404 saying this passes A: let in, the thing asked is absent


R, T, A = "{r}", "{t}", "{a}"
LG_T, LG_R = f"/langgraph/threads/{T}", f"/langgraph/threads/{T}/runs/{R}"

# keyed by the route's name (namespace:name) or, unnamed, its pattern; reads first, then
# acts and changes, then deletes (each case runs on a world of its own per user anyway)
DOORS: dict[str, list[Door]] = {
    # -- sign-in: no one's objects --------------------------------------------------------
    "login": [Door("none", url="/accounts/login/")],
    "logout": [Door("none", "post", "/accounts/logout/", form=True)],
    "password_change": [Door("none", url="/accounts/password_change/")],
    "password_change_done": [Door("none", url="/accounts/password_change/done/")],
    "favicon.ico": [Door("none", url="/favicon.ico")],
    # -- the pages ------------------------------------------------------------------------
    "dashboard:runs": [Door("list", url="/", shows=R)],
    "dashboard:run_new": [Door("none", url="/runs/new/")],
    "dashboard:run_detail": [Door("owned", url=f"/runs/{R}/")],
    "dashboard:run_event": [Door("owned", url=f"/runs/{R}/events/1/")],
    "dashboard:run_task": [Door("owned", url=f"/runs/{R}/tasks/1/", missing="has no task")],
    "dashboard:run_state": [Door("owned", url=f"/runs/{R}/state/?checkpoint={{cp}}")],
    "dashboard:run_interrupts": [
        Door("owned", url=f"/runs/{R}/interrupts/"),
        Door("owned", "post", f"/runs/{R}/interrupts/", {"interrupt": "{i}",
                                                          "answer": "Germany"},
             "answer_interrupt", form=True)],
    "dashboard:run_debug": [Door("owned", url=f"/runs/{R}/debug/")],
    "dashboard:run_breakpoints": [Door("owned", "post", f"/runs/{R}/breakpoints/", {},
                                       "debug_run", form=True)],
    "dashboard:run_continue": [Door("owned", "post", f"/runs/{R}/continue/", {},
                                    "debug_run", form=True)],
    "dashboard:run_fork": [
        Door("owned", url=f"/runs/{R}/fork/?checkpoint={{cp}}", perm="fork_run"),
        Door("owned", "post", f"/runs/{R}/fork/", {"checkpoint": "{cp}"}, "fork_run",
             form=True)],
    "dashboard:run_state_edit": [
        Door("owned", url=f"/runs/{R}/state/edit/", perm="debug_run"),
        Door("owned", "post", f"/runs/{R}/state/edit/", {"values": "{}"}, "debug_run",
             form=True)],
    "dashboard:run_compare": [Door("owned", url=f"/runs/{R}/compare/{{own}}/"),
                              Door("owned", url=f"/runs/{{own}}/compare/{R}/")],
    "dashboard:runs_compare": [Door("owned", url=f"/runs/compare/?runs={R}&runs={{own}}"),
                               Door("owned", url=f"/runs/compare/?tree={R}")],
    "dashboard:run_cancel": [Door("owned", "post", f"/runs/{R}/cancel/", {}, "cancel_run",
                                  form=True)],
    "dashboard:run_budget": [Door("owned", "post", f"/runs/{R}/budget/", {"action": "stop"},
                                  "cancel_run", form=True)],
    "dashboard:inbox": [Door("list", url="/inbox/", shows=R)],
    "dashboard:inbox_answer": [Door("owned", "post", "/inbox/answer/", {
        "interrupt": "{i}", "prefix": "g1", "g1-answer": "Germany"}, "answer_interrupt",
        form=True)],
    "dashboard:history": [Door("list", url="/inbox/history/", shows="{old}")],
    "dashboard:history_csv": [Door("list", url="/inbox/history.csv", shows="{old}")],
    "dashboard:notice_link": [Door("owned", url="/inbox/notice/{notice}/")],
    "dashboard:interrupt_take": [Door("owned", "post", "/inbox/questions/{i}/take/", {},
                                      "answer_interrupt", form=True)],
    "dashboard:interrupt_assign": [Door("owned", "post", "/inbox/questions/{i}/assign/",
                                        {"username": "{me}"}, "assign_interrupt",
                                        form=True)],
    "dashboard:crons": [Door("list", url="/crons/", shows="{c8}")],
    # -- /api/ ----------------------------------------------------------------------------
    "api:run-list": [Door("list", url="/api/runs/", shows=R)],
    "api:run-detail": [Door("owned", url=f"/api/runs/{R}/")],
    "api:run-events": [Door("owned", url=f"/api/runs/{R}/events/")],
    "api:run-export": [Door("owned", url=f"/api/runs/{R}/export/")],
    "api:run-checkpoints": [Door("owned", url=f"/api/runs/{R}/checkpoints/")],
    "api:run-checkpoint": [Door("owned", url=f"/api/runs/{R}/checkpoints/{{cp}}/")],
    "api:run-breakpoints": [Door("owned", "post", f"/api/runs/{R}/breakpoints/",
                                 {"interrupt_before": []}, "debug_run")],
    "api:run-resume": [Door("owned", "post", f"/api/runs/{R}/continue/", {}, "debug_run")],
    "api:run-fork": [Door("owned", "post", f"/api/runs/{R}/fork/", {"checkpoint_id": "{cp}"},
                          "fork_run")],
    "api:run-fork-ways": [Door("owned", "post", f"/api/runs/{R}/fork-ways/", {
        "checkpoint_id": "{cp}", "ways": [{"model": "scripted"}, {"temperature": 0.5}]},
        "fork_run")],
    "api:run-compare": [Door("owned", url=f"/api/runs/compare/?runs={R}&runs={{own}}")],
    "api:run-cancel": [Door("owned", "post", f"/api/runs/{R}/cancel/", {}, "cancel_run")],
    "api:run-budget": [Door("owned", "post", f"/api/runs/{R}/budget/", {"stop": True},
                            "cancel_run")],
    "api:interrupt-list": [Door("list", url="/api/interrupts/", shows=R)],
    "api:interrupt-history": [Door("list", url="/api/interrupts/history/", shows="{old}")],
    "api:interrupt-detail": [Door("owned", url="/api/interrupts/{i}/")],
    "api:interrupt-answer": [Door("owned", "post", "/api/interrupts/{i}/answer/",
                                  {"answer": "Germany"}, "answer_interrupt")],
    "api:graph-list": [Door("none", url="/api/graphs/")],
    "api:graph-detail": [Door("none", url="/api/graphs/test.echo/")],
    "api:schema": [Door("none", url="/api/schema/")],
    "api:docs": [Door("none", url="/api/docs/")],
    "api:redoc": [Door("none", url="/api/redoc/")],
    "api:not-found": [Door("none", url=f"/api/nothing/{R}/")],
    # -- /langgraph/ ----------------------------------------------------------------------
    "langgraph:info": [Door("none", url="/langgraph/info")],
    "langgraph:openapi": [Door("none", url="/langgraph/openapi.json")],
    "langgraph:assistants": [Door("none", "post", "/langgraph/assistants", {
        "graph_id": "test.echo", "assistant_id": A, "if_exists": "do_nothing"}, "start_run")],
    "langgraph:assistant-search": [Door("list", "post", "/langgraph/assistants/search", {},
                                        shows=A)],
    "langgraph:assistant-count": [Door("list", "post", "/langgraph/assistants/count",
                                       {"metadata": {"owner_mark": "{mark}"}},
                                       shows="1")],
    "langgraph:assistant": [
        Door("owned", url=f"/langgraph/assistants/{A}"),
        Door("owned", "patch", f"/langgraph/assistants/{A}", {"name": "taken"}, "start_run"),
        Door("owned", "delete", f"/langgraph/assistants/{A}", None, "delete_run")],
    "langgraph:assistant-versions": [Door("owned", "post",
                                          f"/langgraph/assistants/{A}/versions", {})],
    "langgraph:assistant-latest": [Door("owned", "post", f"/langgraph/assistants/{A}/latest",
                                        {"version": 1}, "start_run")],
    "langgraph:assistant-graph": [Door("owned", url=f"/langgraph/assistants/{A}/graph")],
    "langgraph:assistant-schemas": [Door("owned", url=f"/langgraph/assistants/{A}/schemas")],
    "langgraph:assistant-subgraphs": [Door("owned",
                                           url=f"/langgraph/assistants/{A}/subgraphs")],
    "langgraph:assistant-subgraphs-at": [Door("owned",
                                              url=f"/langgraph/assistants/{A}/subgraphs/x")],
    "langgraph:threads": [Door("owned", "post", "/langgraph/threads", {
        "thread_id": T, "if_exists": "do_nothing"}, "start_run", refused=(404, 409))],
    "langgraph:thread-search": [Door("list", "post", "/langgraph/threads/search", {},
                                     shows=T)],
    "langgraph:thread": [
        Door("owned", url=LG_T),
        Door("owned", "patch", LG_T, {"metadata": {"taken": True}}, "start_run"),
        Door("owned", "delete", LG_T, None, "delete_run")],
    "langgraph:thread-state": [
        Door("owned", url=f"{LG_T}/state"),
        Door("owned", "post", f"{LG_T}/state", {"values": {"steps": 9}}, "debug_run")],
    "langgraph:thread-state-checkpoint": [Door("owned", "post", f"{LG_T}/state/checkpoint",
                                               {"checkpoint": {"checkpoint_id": "{cp}"}})],
    "langgraph:thread-state-at": [Door("owned", url=f"{LG_T}/state/{{cp}}")],
    "langgraph:thread-history": [Door("owned", url=f"{LG_T}/history"),
                                 Door("owned", "post", f"{LG_T}/history", {"limit": 5})],
    "langgraph:runs": [
        Door("owned", url=f"{LG_T}/runs"),
        Door("owned", "post", f"{LG_T}/runs", {"assistant_id": "test.echo",
                                               "input": {"steps": 1}}, "start_run")],
    "langgraph:thread-crons": [Door("owned", "post", f"{LG_T}/runs/crons", {
        "assistant_id": "test.echo", "schedule": "0 5 * * *"}, "start_run")],
    "langgraph:run-stream": [Door("owned", "post", f"{LG_T}/runs/stream", {
        "assistant_id": "test.echo", "input": {"steps": 1}}, "start_run")],
    "langgraph:run-wait": [Door("owned", "post", f"{LG_T}/runs/wait", {
        "assistant_id": "test.echo", "command": {"resume": "Germany"}}, "start_run")],
    "langgraph:run": [Door("owned", url=LG_R),
                      Door("owned", "delete", LG_R, None, "delete_run")],
    "langgraph:run-join": [Door("owned", url=f"{LG_R}/join?cancel_on_disconnect=false")],
    "langgraph:run-join-stream": [Door("owned", url=f"{LG_R}/stream")],
    "langgraph:run-cancel": [Door("owned", "post", f"{LG_R}/cancel", {}, "cancel_run")],
    "langgraph:runs-cancel": [Door("owned", "post", "/langgraph/runs/cancel",
                                   {"thread_id": T, "run_ids": [R]}, "cancel_run",
                                   missing="no run to cancel"),
                              Door("none", "post", "/langgraph/runs/cancel",
                                   {"status": "all"}, "cancel_run")],
    "langgraph:crons": [Door("owned", "post", "/langgraph/runs/crons", {
        "assistant_id": A, "schedule": "0 5 * * *"}, "start_run")],
    "langgraph:cron-search": [Door("list", "post", "/langgraph/runs/crons/search", {},
                                   shows="{c}")],
    "langgraph:cron-count": [Door("list", "post", "/langgraph/runs/crons/count",
                                  {"assistant_id": "test.echo", "thread_id": T}, shows="1")],
    "langgraph:cron": [
        Door("owned", "patch", "/langgraph/runs/crons/{c}", {"schedule": "0 4 * * *"},
             "start_run"),
        Door("owned", "delete", "/langgraph/runs/crons/{c}", None, "delete_run")],
    "langgraph:stateless-runs": [Door("owned", "post", "/langgraph/runs", {
        "assistant_id": A, "input": {"steps": 1}}, "start_run")],
    "langgraph:stateless-run-stream": [Door("owned", "post", "/langgraph/runs/stream", {
        "assistant_id": A, "input": {"steps": 1}}, "start_run")],
    "langgraph:stateless-run-wait": [Door("owned", "post", "/langgraph/runs/wait", {
        "assistant_id": A, "input": {"steps": 1}}, "start_run")],
    "langgraph:store-items": [
        Door("owned", url="/langgraph/store/items?namespace={space}&key=secret"),
        Door("owned", "put", "/langgraph/store/items", {
            "namespace": ["{space}"], "key": "secret", "value": {"text": "B's"}},
             "start_run"),
        Door("owned", "delete", "/langgraph/store/items", {
            "namespace": ["{space}"], "key": "secret"}, "delete_run")],
    "langgraph:store-search": [Door("list", "post", "/langgraph/store/items/search",
                                    {"namespace_prefix": ["{space}"]}, shows="secret")],
    "langgraph:store-namespaces": [Door("list", "post", "/langgraph/store/namespaces",
                                        {"limit": 1000}, shows="{space}")],
    "langgraph:not-served": [Door("none", url=f"/langgraph/nothing/{R}")],
    # -- the admin: staff only --------------------------------------------------------------
    "admin:*": [Door("staff")],
}

SOCKETS: dict[str, Door] = {
    "ws/runs/": Door("list", url="/ws/runs/", shows=R),
    "ws/inbox/": Door("list", url="/ws/inbox/", shows=R),
    "ws/runs/<uuid:run_id>/": Door("owned", url=f"/ws/runs/{R}/"),
}


def url_patterns(patterns=None, prefix: str = "", namespace: str = ""):
    """Every (key, route) of the resolver, recursively: the key is ``namespace:name``, or
    the pattern for an unnamed route; the admin's, ``admin:*``."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from url_patterns(pattern.url_patterns, route, inner)
        elif isinstance(pattern, URLPattern):
            if namespace.startswith("admin:"):
                yield "admin:*", route
            else:
                yield (f"{namespace}{pattern.name}" if pattern.name else route), route


def test_every_route_has_a_case():
    """A new door fails here until the table says who may pass it."""
    from dashboard.web.routing import websocket_urlpatterns

    keys = {key for key, _ in url_patterns()}
    assert keys - DOORS.keys() == set(), "routes without a case in DOORS"
    assert DOORS.keys() - keys == set(), "cases of routes that are gone"
    sockets = {str(p.pattern) for p in websocket_urlpatterns}
    assert sockets == SOCKETS.keys()


def marks(users, w: World) -> dict[str, str]:
    """What the placeholders of :data:`DOORS` stand for: A's objects, and B's own run."""
    a = users["A"]
    own = {who: Run.objects.create(graph="test.echo", thread_id=f"{who}-own:planner",
                                   created_by=users[who], state=Run.State.SUCCEEDED).id
           for who in ("A", "B")}  # the caller's own run, for the comparison
    notice = Notice.objects.create(interrupt=w.interrupt, kind=Notice.Kind.ASKED,
                                   channel=Notice.Channel.EMAIL, recipient=a,
                                   address="a@example.test", next_attempt_at=w.run.created_at)
    mark = f"mark{w.run.id.hex[:8]}"
    Assistant.objects.filter(id=w.assistant.id).update(metadata={"owner_mark": mark})
    (old,) = waiting(1, REGION, user=a)  # an answered question: the history's
    Interrupt.objects.filter(pk=old.pk).update(
        status=Interrupt.Status.ANSWERED, answer="Germany", answered_by=a,
        answered_at=w.run.created_at)
    return {"r": str(w.run.id), "t": str(w.thread.id), "a": str(w.assistant.id),
            "c": str(w.cron.id), "c8": str(w.cron.id)[:8], "i": str(w.interrupt.pk),
            "cp": w.checkpoint, "space": w.space, "own A": str(own["A"]), "own B": str(own["B"]),
            "notice": notice_token(notice), "old": str(old.run_id), "mark": mark}


def fill(value, names: dict[str, str]):
    """``value`` with its placeholders replaced (in strings, lists and dicts)."""
    if isinstance(value, str):
        return re.sub(r"\{(\w+)\}", lambda m: names.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [fill(v, names) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, names) for k, v in value.items()}
    return value


def send(client: Client, door: Door, names: dict[str, str]):
    url, body = fill(door.url, names), fill(door.body, names)
    if url.endswith(".csv"):  # read what it streams
        response = client.get(url)
        response.read_text = b"".join(response.streaming_content).decode()
        return response
    if door.form:
        response = getattr(client, door.method)(url, body or {})
        response.close()
        return response
    return call(client, door.method, url, body)


def secrets_of(w: World, names: dict[str, str]) -> dict[str, str]:
    """A's ids, which B's answers must never hold unless B's request named them."""
    return {"A's run": names["r"], "A's thread": names["t"], "A's assistant": names["a"],
            "A's cron": names["c"], "A's checkpoint": names["cp"], "A's store": names["space"],
            "A's answered run": names["old"]}


def body_of(response) -> str:
    if hasattr(response, "read_text"):
        return response.read_text
    if getattr(response, "streaming", False):
        return ""  # closed unread: what it would stream is the owned check's question
    return response.content.decode(errors="replace")


@pytest.fixture
def doors(world):
    users, w = world
    names = marks(users, w)
    group = Group.objects.create(name="answerers")
    for user in users.values():
        user.groups.add(group)
    return users, w, names


CASES = [(key, n) for key, cases in DOORS.items() for n in range(len(cases))]


@pytest.mark.parametrize(("key", "n"), CASES, ids=[f"{k}#{n}" for k, n in CASES])
def test_b_neither_reads_nor_changes_as_through_any_door(doors, key, n):
    users, w, names = doors
    door = DOORS[key][n]
    names = {**names, "me": "B", "own": names["own B"]}
    b = client_of(users["B"])
    if door.kind == "staff":
        response = b.get("/admin/")
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
        for url in ("/admin/dashboard/run/", f"/admin/dashboard/run/{names['r']}/change/",
                    "/admin/dashboard/checkpoint/", "/admin/auth/user/"):
            response = b.get(url)
            assert response.status_code == 302, (url, response.status_code)
        return
    response = send(b, door, names)
    assert response.status_code < 500, (key, response.status_code, body_of(response)[:300])
    asked = fill(door.url, names) + json.dumps(fill(door.body, names))
    seen = body_of(response)
    leaked = [what for what, value in secrets_of(w, names).items()
              if value and value not in asked and value in seen]
    assert leaked == [], f"B's answer through {key} holds {leaked}"
    if door.kind == "owned":
        assert response.status_code in door.refused, (
            f"B passed {key}: {response.status_code} {seen[:300]}")
    elif door.kind == "list" and door.shows:
        assert response.status_code == 200, (key, response.status_code)
        shown = fill(door.shows, names)
        if shown != "1":  # a count: B counts none of A's
            assert shown not in seen, f"B's list {key} shows A's {shown}"
        else:
            assert json.loads(seen) == 0, f"B's count {key} counts A's: {seen}"
    # and A's objects are as A left them
    w.cron.refresh_from_db()
    assert w.cron.schedule == "0 3 * * *"
    assert Assistant.objects.get(id=w.assistant.id).name == "A's"
    assert Thread.objects.filter(id=w.thread.id, metadata__has_key="taken").count() == 0
    assert Interrupt.objects.get(pk=w.interrupt.pk).status == "pending"
    assert Run.objects.get(id=w.run.id).status == "interrupted"
    assert Run.objects.filter(conversation=w.thread).count() == 1
    assert not Cron.objects.exclude(id=w.cron.id).filter(user=users["A"]).exists()


@pytest.mark.parametrize(("key", "n"), [c for c in CASES if DOORS[c[0]][c[1]].kind in
                                        ("owned", "list")],
                         ids=[f"{k}#{n}" for k, n in CASES
                              if DOORS[k][n].kind in ("owned", "list")])
def test_a_passes_the_same_door(doors, key, n):
    """The case asks the right address: its owner gets past the rule (and a list shows
    A's object to A), so B's refusal above is the rule's, not a wrong id's."""
    users, _, names = doors
    door = DOORS[key][n]
    names = {**names, "me": "A", "own": names["own A"]}
    response = send(client_of(users["A"]), door, names)
    seen = body_of(response)
    if door.kind == "owned":
        if door.perm and not users["A"].has_perm(f"dashboard.{door.perm}"):
            assert response.status_code == 403, (key, response.status_code)  # A lacks it
        elif not (door.missing and response.status_code == 404 and door.missing in seen):
            assert passed(response), (key, response.status_code, seen[:300])
    else:
        assert response.status_code == 200, (key, response.status_code)
        shown = fill(door.shows, names)
        if shown == "1":
            assert json.loads(seen) >= 1, (key, seen)
        elif shown:
            assert shown in seen, (key, shown)


async def _socket(user, path: str):
    """A websocket to ``path`` as ``user``: (accepted, close code or None)."""
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator

    from dashboard.web.routing import websocket_urlpatterns

    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path,
                                         headers=[(b"origin", b"http://testserver")])
    communicator.scope["user"] = user
    connected, code = await communicator.connect()
    if connected:
        await communicator.disconnect()
    return connected, code


@pytest.mark.parametrize("key", [k for k, d in SOCKETS.items() if d.kind == "owned"])
async def test_b_opens_no_socket_on_as_run_and_learns_nothing_of_it(doors, key):
    """A's run's trace socket refuses B as it refuses an unknown run (the same close code:
    B cannot tell A's run exists); A's opens."""
    import uuid

    users, _, names = doors
    url = fill(SOCKETS[key].url, names)
    b_connected, b_code = await _socket(users["B"], url)
    unknown = await _socket(users["B"], url.replace(names["r"], str(uuid.uuid4())))
    assert not b_connected and (b_connected, b_code) == unknown
    assert (await _socket(users["A"], url))[0]


def test_the_api_serves_no_format_suffix_twins(doors):
    """``/api/runs.json`` and ``/api/runs/<id>.json`` answered 500 (the viewsets take no
    ``format``): they are not served, the 404 of any unknown path."""
    users, _, names = doors
    client = client_of(users["A"])
    for url in ("/api/runs.json", f"/api/runs/{names['r']}.json",
                f"/api/runs/{names['r']}/events.json"):
        assert call(client, "get", url, None).status_code == 404, url
