"""Two owners and their roles, and A's resources, for the ownership tests
(``tests/security/test_ownership.py``, ``tests/security/test_every_door.py``)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from dashboard import assistants, crons, services
from dashboard.models import Assistant, Cron, Interrupt, Run, RunEvent, Thread
from tests.conftest import api_token, wait_run

ACTIONS = ["start_run", "cancel_run", "answer_interrupt", "debug_run", "fork_run",
           "delete_run"]
USERS = {  # who: (their permissions, of the team)
    "A": (ACTIONS, False), "B": (ACTIONS, False), "viewer": ([], False),
    "deleter": (["delete_run"], False), "team": (ACTIONS, True),
}


@dataclass
class World:
    """A's resources, by the names the routes use."""

    run: Run
    thread: Thread
    interrupt: Interrupt
    checkpoint: str
    assistant: Assistant
    cron: Cron
    space: str  # A's store item is "secret" in namespace [space] (the store's table
    # outlives a test: a namespace of its own)


def make_user(django_user_model, name: str):
    perms, team = USERS[name]
    user = django_user_model.objects.create_user(username=name, password=f"pw-{name}-12345")
    user.user_permissions.set(Permission.objects.filter(
        codename__in=[*perms, *(["view_all_threads"] if team else [])]))
    return user


@pytest.fixture
def world(executor, django_user_model) -> tuple[dict, World]:
    users = {name: make_user(django_user_model, name) for name in USERS}
    a = users["A"]
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 2, "ask": True},
                                       user=a).id)
    assistant = assistants.assistant_create(graph_id="test.echo", user=a, name="A's",
                                       config={"configurable": {"shop": "a"}})
    thread = run.conversation
    thread.metadata = {"assistant_id": str(assistant.id)}  # delete_threads would take it
    thread.save()
    cron = crons.cron_create(assistant_id="test.echo", schedule="0 3 * * *", user=a,
                             thread=thread, payload={"input": {"steps": 1}}, enabled=False)
    space = f"notes{uuid.uuid4().hex}"
    put = call(client_of(a), "put", "/langgraph/store/items",
               {"namespace": [space], "key": "secret", "value": {"text": "A's"}})
    assert put.status_code == 204
    return users, World(
        run=run, thread=thread, interrupt=run.interrupts.get(status="pending"),
        checkpoint=run.events.filter(kind=RunEvent.Kind.CHECKPOINT).first().checkpoint_id,
        assistant=assistant, cron=cron, space=space)


def client_of(user) -> Client:
    """A client signed in as ``user`` (pages) with its token (``/api/``, ``/langgraph/``)."""
    token = api_token(user)
    client = Client(headers={"Authorization": f"Token {token}", "x-api-key": token})
    client.force_login(user)
    return client


def call(client: Client, method: str, url: str, data: dict | None):
    response = getattr(client, method)(url, json.dumps(data) if data is not None else "",
                                       content_type="application/json")
    response.close()
    return response


def expected(who: str, perm: str) -> set[int] | str:
    """The cell: "ok" (passes the rule: :func:`passed`), or the refusals allowed."""
    perms, team = USERS[who]
    reads = who == "A" or team
    allowed = not perm or perm in perms
    if reads:
        return "ok" if allowed else {403}
    return {404} if allowed else {403, 404}


def passed(response) -> bool:
    """Whether the request got past the rule: done (a page redirects after a POST), or
    refused for the state it found (LangGraph answers 404 for a run "neither pending nor
    running: there is nothing to cancel")."""
    status = response.status_code
    return 200 <= status < 400 or status in (409, 422) or (
        status == 404 and "nothing to cancel" in response.content.decode())
