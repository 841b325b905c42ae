"""Deadlines that end safely: a reminder before, an escalation at, and the declared outcome
after (a default answer recorded as the deadline's, or the run cancelled with the reason),
each exactly once, shown in the trace and the history. The sweeps are given the moment
("now") a few seconds on, so no test sleeps through a deadline."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import tests.dashboard.interrupt_graphs  # noqa: F401  (registers test.ask)
from dashboard import deadlines, services
from dashboard.models import Interrupt, Notice, Run, RunEvent
from planner.spec import QuestionDeadline, question_deadline
from tests.conftest import wait_run

ASK = {"field": "core.region", "prompt": "Which region?", "kind": "text",
       "groups": ["finance"],
       "deadline": {"seconds": 2, "remind_before": 1, "escalate_to": ["leads"],
                    "escalate_for": 1, "default": "Germany"}}


def asked_run(operator, payload):
    run = wait_run(services.run_create(graph="test.ask", input={"payload": payload},
                                       user=operator).id)
    assert run.status == Run.Status.INTERRUPTED
    return run, run.interrupts.get()


def test_a_deadline_is_declared_per_question_or_per_graph_or_in_the_value():
    per_graph = {"*": QuestionDeadline(seconds=60), "price": QuestionDeadline(
        seconds=5, on_expiry="answer", default=0)}
    assert question_deadline(per_graph, {"field": "price"}).default == 0
    assert question_deadline(per_graph, {"field": "x"}).seconds == 60
    assert question_deadline({}, {"field": "x"}) is None
    own = question_deadline(per_graph, {"field": "price", "deadline": {"seconds": 3,
                                                                       "default": "no"}})
    assert (own.seconds, own.on_expiry, own.default) == (3, "answer", "no")
    with pytest.raises(ValueError, match=r"unknown deadline key.*'secs'.*use: default"):
        QuestionDeadline.from_value({"secs": 3})
    with pytest.raises(ValueError, match="unknown on_expiry 'wait'; use one of: answer, cancel"):
        QuestionDeadline(seconds=3, on_expiry="wait")
    with pytest.raises(ValueError, match=r"positive number, at most \d+ \(ten years\), not -1"):
        QuestionDeadline.from_value(-1)


@pytest.mark.django_db(transaction=True)
def test_reminder_escalation_then_the_default_applied_once_in_trace_and_history(
        executor, operator, client):
    Group.objects.create(name="finance")
    Group.objects.create(name="leads")
    run, asked = asked_run(operator, ASK)
    t0 = asked.created_at
    assert (asked.remind_at - t0, asked.deadline_at - t0, asked.expires_at - t0) == (
        timedelta(seconds=1), timedelta(seconds=2), timedelta(seconds=3))

    client.force_login(operator)
    form = client.get(f"/runs/{run.id}/interrupts/").content.decode()
    assert f"deadline {asked.deadline_at:%H:%M:%S} UTC, then the default" in form
    assert deadlines.deadlines_sweep(now=t0 + timedelta(seconds=0.5)) == {
        "reminded": 0, "escalated": 0, "expired": 0}
    assert deadlines.deadlines_sweep(now=t0 + timedelta(seconds=1.1))["reminded"] == 1
    assert deadlines.deadlines_sweep(now=t0 + timedelta(seconds=1.2))["reminded"] == 0
    with pytest.raises(services.AnswerForbidden):  # leads may not answer yet
        lead = _lead()
        services.interrupt_answer(interrupt=asked, answer="x", user=lead)
    assert deadlines.deadlines_sweep(now=t0 + timedelta(seconds=2.1))["escalated"] == 1
    asked.refresh_from_db()
    assert asked.group_names == ["finance", "leads"]  # the leads may answer it now
    done = deadlines.deadlines_sweep(now=t0 + timedelta(seconds=3.1))
    assert done == {"reminded": 0, "escalated": 0, "expired": 1}
    assert deadlines.deadlines_sweep(now=t0 + timedelta(seconds=9))["expired"] == 0

    run = wait_run(run.id, statuses=("succeeded", "failed", "cancelled"))
    assert run.status == Run.Status.SUCCEEDED and run.output == {"answer": "Germany"}
    asked.refresh_from_db()
    assert (asked.status, asked.answered_via, asked.answerer_name, asked.answer) == (
        Interrupt.Status.ANSWERED, Interrupt.Channel.DEADLINE, "the deadline", "Germany")
    kinds = list(run.events.order_by("seq").values_list("kind", flat=True))
    assert kinds.count(RunEvent.Kind.QUESTION_REMINDED) == 1
    assert kinds.count(RunEvent.Kind.QUESTION_ESCALATED) == 1
    assert kinds.count(RunEvent.Kind.INTERRUPT_ANSWERED) == 1

    trace = client.get(f"/runs/{run.id}/").content.decode()
    assert "reminded: its deadline draws near" in trace
    assert "deadline came: escalated to leads" in trace
    assert "answered &quot;Germany&quot; by the deadline to “Which region?”" in trace
    history = client.get("/inbox/history/?via=deadline").content.decode()
    assert f"history-{asked.pk}" in history
    assert "the deadline" in history and "Deadline default" in history
    api = client.get("/api/interrupts/history/?via=deadline").json()
    assert [r["answered_by"] for r in api["results"]] == ["the deadline"]


def _lead():
    from django.contrib.auth.models import Permission, User

    lead = User.objects.create_user(username="lee")
    lead.user_permissions.set(Permission.objects.filter(
        codename__in=["answer_interrupt", "view_all_threads"]))
    lead.groups.add(Group.objects.get(name="leads"))
    return lead


@pytest.mark.django_db(transaction=True)
def test_a_deadline_that_cancels_ends_the_run_with_the_reason(executor, operator, client):
    run, asked = asked_run(operator, {"field": "budget", "prompt": "Budget?", "kind": "text",
                                      "deadline": {"seconds": 1}})
    assert deadlines.deadlines_sweep(now=asked.created_at + timedelta(seconds=1.5))[
        "expired"] == 1
    run.refresh_from_db()
    asked.refresh_from_db()
    assert (run.status, asked.status) == (Run.Status.CANCELLED, Interrupt.Status.EXPIRED)
    cancelled = run.events.get(kind=RunEvent.Kind.RUN_CANCELLED)
    assert "the question 'budget' passed its deadline" in cancelled.payload["reason"]
    with pytest.raises(services.InterruptClosed, match="deadline passed"):
        services.interrupt_answer(interrupt=asked, answer="10", user=operator)
    client.force_login(operator)
    history = client.get("/inbox/history/?outcome=expired").content.decode()
    assert f"history-{asked.pk}" in history and "nobody answered by its deadline" in history


@pytest.mark.django_db(transaction=True)
def test_a_malformed_deadline_in_a_value_is_ignored_and_the_question_waits(executor, operator):
    _run, asked = asked_run(operator, {"field": "x", "prompt": "X?", "deadline": "soon"})
    assert asked.status == Interrupt.Status.PENDING and asked.deadline_at is None


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
def test_two_sweeps_racing_a_passed_deadline_apply_its_default_once(
        executor, operator, settings):
    """Two threads, each on its own database connection, sweep at the same moment (two
    web processes' loops would race the same claim); the answer's claim picks one."""
    settings.PLANWATCH = {**settings.PLANWATCH, "WEBHOOK_URL": "http://127.0.0.1:9/none"}
    run, asked = asked_run(operator, {"field": "x", "prompt": "X?", "deadline": {
        "seconds": 1, "default": "fallback", "escalate_to": ["leads"]}})
    now = asked.created_at + timedelta(seconds=5)
    start, results = threading.Barrier(2), []

    def sweep():
        start.wait()
        try:
            results.append(deadlines.deadlines_sweep(now=now))
        finally:
            connection.close()

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(r["expired"] for r in results) == [0, 1]
    assert sorted(r["escalated"] for r in results) == [0, 1]
    assert Notice.objects.filter(kind=Notice.Kind.ESCALATION).count() == 1
    run = wait_run(run.id, statuses=("succeeded", "failed", "cancelled"))
    assert run.output == {"answer": "fallback"}
    assert run.events.filter(kind=RunEvent.Kind.INTERRUPT_ANSWERED).count() == 1
    assert run.events.filter(kind=RunEvent.Kind.QUESTION_ESCALATED).count() == 1


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("poller", ["deadlines", "crons"])
def test_a_poll_gives_its_connection_back_whatever_thread_ran_it(poller):
    """The pollers run on whichever thread of the loop's executor is free: a connection
    left open on each would hold the pool's share of every such thread (a served daphne's
    pool of 6 ran dry under load, and every request then waited 30 s for a connection)."""
    from dashboard import crons

    poll = {"deadlines": deadlines.poll_once, "crons": crons.poll_once}[poller]
    left_open = []

    def look():
        poll()
        left_open.append(connection.connection is not None)

    for _ in range(3):
        thread = threading.Thread(target=look)
        thread.start()
        thread.join(30)
    assert left_open == [False, False, False]


def _question(**moments) -> Interrupt:
    run = Run.objects.create(graph="test.ask", thread_id=f"{uuid.uuid4()}",
                             state=Run.State.INTERRUPTED)
    return Interrupt.objects.create(run=run, interrupt_id="q", node="ask",
                                    payload={"field": "core.region"}, **moments)


@pytest.mark.pg
@pytest.mark.both
@pytest.mark.django_db(transaction=True)
def test_a_look_with_nothing_due_is_one_statement():
    """Most looks find nothing to do: one statement then, not one per part (five looks a
    second in every web process cost about a tenth of its CPU under many runs)."""
    now = timezone.now()
    _question(notified_at=now, remind_at=now + timedelta(hours=1),
              deadline_at=now + timedelta(hours=2), expires_at=now + timedelta(hours=3))
    with CaptureQueriesContext(connection) as looked:
        assert deadlines.poll_once() == {}
    assert len(looked) == 1


SOON, PAST = timedelta(hours=1), timedelta(seconds=-1)


@pytest.mark.pg
@pytest.mark.both
@pytest.mark.django_db
@pytest.mark.parametrize(("moments", "due"), [
    ({}, True),  # not told yet
    ({"notified": True}, False),
    ({"notified": True, "remind_at": PAST}, True),
    ({"notified": True, "remind_at": PAST, "reminded_at": PAST}, False),
    ({"notified": True, "deadline_at": PAST}, True),
    ({"notified": True, "deadline_at": PAST, "escalated_at": PAST}, False),
    ({"notified": True, "expires_at": PAST}, True),
    ({"notified": True, "expires_at": SOON, "remind_at": SOON, "deadline_at": SOON}, False),
])
def test_a_look_is_due_exactly_when_a_part_has_work(moments, due):
    now = timezone.now()
    fields = {name: now + delta for name, delta in moments.items() if name != "notified"}
    if moments.get("notified"):
        fields["notified_at"] = now
    _question(**fields)
    assert deadlines.anything_due(now) is due


@pytest.mark.pg
@pytest.mark.both
@pytest.mark.django_db
@pytest.mark.parametrize(("status", "attempt", "claimed", "due"), [
    (Notice.Status.PENDING, PAST, None, True),
    (Notice.Status.PENDING, SOON, None, False),
    (Notice.Status.SENDING, PAST, PAST, True),  # its sender died
    (Notice.Status.SENDING, PAST, SOON, False),
    (Notice.Status.SENT, PAST, None, False),
])
def test_a_look_is_due_when_a_notice_is(status, attempt, claimed, due):
    now = timezone.now()
    asked = _question(notified_at=now)
    Notice.objects.create(interrupt=asked, kind=Notice.Kind.ASKED,
                          channel=Notice.Channel.WEBHOOK, address="http://127.0.0.1:9/",
                          status=status, next_attempt_at=now + attempt,
                          claimed_until=now + claimed if claimed else None,
                          sent_at=now if status == Notice.Status.SENT else None)
    assert deadlines.anything_due(now) is due


@pytest.mark.pg
@pytest.mark.both
@pytest.mark.parametrize("deadline", [
    {"seconds": 1e18}, {"seconds": 9e15}, {"seconds": 1e300},
    {"seconds": 5, "remind_before": 1e300}, {"seconds": 5, "escalate_for": 1e300}])
@pytest.mark.django_db(transaction=True)
def test_a_deadline_too_far_in_a_value_is_ignored_and_said_in_the_trace(
        executor, operator, deadline):
    """Beyond ten years (a datetime overflows past 9999): the question waits, its deadline
    ignored, and the question's event in the run's log says why (on PostgreSQL too, whose
    jsonb gave the run's 1e300 back as an integer no checkpoint stored)."""
    run, asked = asked_run(operator, {"field": "x", "prompt": "X?", "deadline": deadline})
    assert asked.status == Interrupt.Status.PENDING and asked.deadline_at is None
    raised = run.events.get(kind=RunEvent.Kind.INTERRUPT_RAISED)
    (name,) = (key for key in deadline if deadline[key] != 5)
    assert f"a deadline's {name} must be" in raised.payload["deadline_ignored"]
    assert "at most 315576000" in raised.payload["deadline_ignored"]


def test_every_duration_of_a_deadline_is_bounded():
    with pytest.raises(ValueError, match=r"seconds must be .* at most 315576000 \(ten years\)"):
        QuestionDeadline(seconds=9e15)
    for name in ("remind_before", "escalate_for"):
        with pytest.raises(ValueError, match=f"a deadline's {name} must be .* at most"):
            QuestionDeadline.from_value({"seconds": 5, name: 1e300})
    assert QuestionDeadline(seconds=315576000).seconds == 315576000
