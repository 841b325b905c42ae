"""Answering interrupts through the run's question fragment: forms, errors, audit trail."""

from __future__ import annotations

import re

import pytest

from dashboard import services
from dashboard.models import Interrupt, Run
from tests.conftest import wait_run

FINAL = ("succeeded", "failed", "cancelled")


def url(run) -> str:
    return f"/runs/{run.id}/interrupts/"


def interrupted_echo(user) -> tuple[Run, Interrupt]:
    run = services.run_create(graph="test.echo", input={"steps": 4, "ask": True}, user=user)
    run = wait_run(run.id)
    assert run.status == Run.Status.INTERRUPTED
    return run, run.interrupts.get()


def test_get_shows_the_pending_question_as_a_form(executor, operator, client):
    run, pending = interrupted_echo(operator)
    client.force_login(operator)
    response = client.get(url(run))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Say something" in html and f'name="i{pending.pk}-answer"' in html
    assert f'hx-post="/runs/{run.id}/interrupts/"' in html
    assert "<fieldset >" in html or "<fieldset>" in html  # answerable: not disabled


def test_htmx_post_answers_and_the_run_finishes_with_an_audit_row(executor, operator, client):
    run, pending = interrupted_echo(operator)
    client.force_login(operator)
    response = client.post(url(run), {f"i{pending.pk}-answer": "hello", "submit": pending.pk},
                           headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "1 answer recorded; the run resumes." in response.content.decode()
    run = wait_run(run.id, statuses=FINAL)
    assert run.status == Run.Status.SUCCEEDED and run.output == {"n": 4, "answer": "hello"}
    pending.refresh_from_db()
    html = client.get(url(run)).content.decode()
    assert f'id="audit-{pending.pk}"' in html
    assert "hello" in html and "olga" in html and pending.checkpoint_id in html


@pytest.mark.parametrize("submit", ["one", "all"])
def test_an_answer_sent_again_with_its_key_is_applied_once_and_said_recorded(
        executor, operator, client, submit):
    # the page sends an answer again when its first reply was lost (the database or the
    # server went away): the same key, the same answer, applied once
    run, pending = interrupted_echo(operator)
    client.force_login(operator)
    page = client.get(url(run), headers={"HX-Request": "true"}).content.decode()
    key = re.search(r'name="answer_key" value="([0-9a-f]{32})"', page).group(1)
    data = {f"i{pending.pk}-answer": "hello", "answer_key": key,
            "submit": pending.pk if submit == "one" else "all"}
    first = client.post(url(run), data, headers={"HX-Request": "true"})
    again = client.post(url(run), data, headers={"HX-Request": "true"})
    assert first.status_code == again.status_code == 200
    assert "1 answer recorded" in again.content.decode()
    run = wait_run(run.id, statuses=FINAL)
    assert run.status == Run.Status.SUCCEEDED and run.output == {"n": 4, "answer": "hello"}
    assert run.events.filter(kind="interrupt_answered").count() == 1
    # another form's post (another key) is still told the question was answered
    other = client.post(url(run), {**data, "answer_key": "f" * 32},
                        headers={"HX-Request": "true"})
    assert other.status_code == 409


def test_plain_post_redirects_to_the_run(executor, operator, client):
    run, pending = interrupted_echo(operator)
    client.force_login(operator)
    response = client.post(url(run), {f"i{pending.pk}-answer": "hi", "submit": pending.pk})
    assert response.status_code == 302
    assert response["Location"] in (f"/runs/{run.id}/", "/")
    assert wait_run(run.id, statuses=FINAL).output["answer"] == "hi"


@pytest.mark.django_db
def test_unknown_run_is_a_404(client, operator):
    client.force_login(operator)
    response = client.get("/runs/00000000-0000-0000-0000-000000000000/interrupts/")
    assert response.status_code == 404
