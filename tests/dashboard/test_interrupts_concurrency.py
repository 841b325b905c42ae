"""Exactly once: racing answers produce one resume; closed questions change nothing."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth.models import Permission
from django.db import connections
from django.test import Client

from dashboard import services
from dashboard.models import Interrupt, Run, RunEvent
from tests.conftest import wait_run

FINAL = ("succeeded", "failed", "cancelled")
HTMX = {"HX-Request": "true"}
ROUNDS = 12

pytestmark = [pytest.mark.pg, pytest.mark.reliability]


def second_operator(django_user_model):
    user = django_user_model.objects.create_user(username="otto", password="pw-otto-1234")
    user.user_permissions.set(Permission.objects.filter(  # of the team: sees every run
        codename__in=["answer_interrupt", "view_all_threads"]))
    return user


def race(run: Run, pending: Interrupt, users) -> list[tuple[str, int, str]]:
    """Two clients, two threads, two database connections, one barrier."""
    barrier = threading.Barrier(len(users))
    results: list[tuple[str, int, str]] = []

    def answer(user) -> None:
        client = Client()
        client.force_login(user)
        barrier.wait()
        try:
            response = client.post(f"/runs/{run.id}/interrupts/",
                                   {f"i{pending.pk}-answer": f"from {user.username}",
                                    "submit": pending.pk}, headers=HTMX)
            results.append((user.username, response.status_code, response.content.decode()))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=answer, args=(u,)) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_two_concurrent_answers_resume_exactly_once(executor, operator, django_user_model):
    users = [operator, second_operator(django_user_model)]
    runs = [services.run_create(graph="test.echo", input={"steps": 2, "ask": True},
                                user=operator) for _ in range(ROUNDS)]
    for run in runs:
        run = wait_run(run.id)
        assert run.status == Run.Status.INTERRUPTED
        pending = run.interrupts.get()
        results = race(run, pending, users)
        assert sorted(code for _, code, _ in results) == [200, 409], results
        winner = next(name for name, code, _ in results if code == 200)
        loser_html = next(html for _, code, html in results if code == 409)
        assert f"already answered by {winner} at" in loser_html
        assert f"with &#x27;from {winner}&#x27;; nothing changed" in loser_html
        done = wait_run(run.id, statuses=FINAL)
        assert done.status == Run.Status.SUCCEEDED
        assert done.output["answer"] == f"from {winner}"
        assert done.events.filter(kind=RunEvent.Kind.RUN_RESUMED).count() == 1
        assert done.events.filter(kind=RunEvent.Kind.INTERRUPT_ANSWERED).count() == 1


def test_answering_a_cancelled_runs_question_changes_nothing(executor, operator, client):
    run = services.run_create(graph="test.echo", input={"steps": 2, "ask": True}, user=operator)
    run = wait_run(run.id)
    pending = run.interrupts.get()
    client.force_login(operator)
    form = client.get(f"/runs/{run.id}/interrupts/").content.decode()
    assert f'name="i{pending.pk}-answer"' in form  # the operator's page still shows the form
    services.run_cancel(run=run, user=operator)
    response = client.post(f"/runs/{run.id}/interrupts/",
                           {f"i{pending.pk}-answer": "too late", "submit": pending.pk},
                           headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 409
    assert "this question was withdrawn (its run was cancelled or moved on); nothing changed" \
        in html
    pending.refresh_from_db()
    assert pending.status == Interrupt.Status.CANCELLED and pending.answer is None
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert not run.events.filter(kind=RunEvent.Kind.RUN_RESUMED).exists()


def test_answering_again_after_the_run_moved_on_names_the_first_answer(
        executor, operator, client):
    run = services.run_create(graph="test.echo", input={"steps": 2, "ask": True}, user=operator)
    pending = wait_run(run.id).interrupts.get()
    client.force_login(operator)
    data = {f"i{pending.pk}-answer": "first", "submit": pending.pk}
    assert client.post(f"/runs/{run.id}/interrupts/", data, headers=HTMX).status_code == 200
    assert wait_run(run.id, statuses=FINAL).output["answer"] == "first"
    data[f"i{pending.pk}-answer"] = "second"
    response = client.post(f"/runs/{run.id}/interrupts/", data, headers=HTMX)
    assert response.status_code == 409
    assert "already answered by olga at" in response.content.decode()
    pending.refresh_from_db()
    assert pending.answer == "first"
    assert Run.objects.get(id=run.id).output["answer"] == "first"
