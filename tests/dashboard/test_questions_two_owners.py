"""Two owners (``dashboard.policy``): user B, who may answer and assign but not read A's
runs, neither sees nor takes nor is given nor is told of A's questions, in the inbox, the
history (page, CSV, API), take and assign, e-mail notices and browser notices; A and the
team do."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from dashboard import notices, selectors
from dashboard.models import Interrupt
from dashboard.web.presentation import inbox
from tests.dashboard.inbox_support import AUDIENCE, REGION, waiting

pytestmark = [pytest.mark.django_db]  # the rule is ORM filters: the same on both databases

HTMX = {"HX-Request": "true"}


def person(django_user_model, name: str, *, team: bool = False):
    user = django_user_model.objects.create_user(username=name, password=f"pw-{name}-12345",
                                                 email=f"{name}@example.test")
    user.user_permissions.set(Permission.objects.filter(codename__in=[
        "answer_interrupt", "assign_interrupt", *(["view_all_threads"] if team else [])]))
    return user


@pytest.fixture
def owners(django_user_model):
    a, b = person(django_user_model, "ann"), person(django_user_model, "bob")
    lead = person(django_user_model, "lea", team=True)
    (pending,) = waiting(1, REGION, goal="Ann bikes", user=a)
    (answered,) = waiting(1, AUDIENCE, goal="Ann brief", user=a)
    Interrupt.objects.filter(pk=answered.pk).update(
        status=Interrupt.Status.ANSWERED, answer="execs", answered_by=a,
        answered_by_name="ann", answered_at=answered.created_at,
        answered_via=Interrupt.Channel.PAGE)
    return a, b, lead, pending, answered


def test_b_does_not_see_a_s_questions_in_the_inbox_or_the_history(client, owners):
    a, b, _lead, _pending, answered = owners
    for user, sees in ((a, True), (b, False)):
        client.force_login(user)
        assert ("Ann bikes" in client.get("/inbox/").content.decode()) is sees
        page = client.get("/inbox/history/").content.decode()
        assert (f"history-{answered.pk}" in page) is sees
        csv = client.get("/inbox/history.csv").getvalue().decode()
        assert (str(answered.run_id) in csv) is sees
        rows = client.get("/api/interrupts/history/").json()["results"]
        assert [r["id"] for r in rows] == ([answered.pk] if sees else [])
    assert selectors.interrupts_pending_count(user=b) == 0


def test_b_may_not_take_or_assign_a_s_question(client, owners):
    _a, b, _lead, pending, _answered = owners
    client.force_login(b)
    assert client.post(f"/inbox/questions/{pending.pk}/take/", headers=HTMX).status_code == 404
    response = client.post(f"/inbox/questions/{pending.pk}/assign/", {"username": "bob"},
                           headers=HTMX)
    assert response.status_code == 404
    pending.refresh_from_db()
    assert pending.assigned_to is None


def test_a_lead_may_not_give_a_s_question_to_b_who_may_not_read_it(client, owners):
    a, _b, lead, pending, _answered = owners
    assert selectors.interrupt_answerers(interrupt=pending) == ["ann", "lea"]
    client.force_login(lead)
    response = client.post(f"/inbox/questions/{pending.pk}/assign/", {"username": "bob"},
                           headers=HTMX)
    assert response.status_code == 422
    assert "bob may not answer it: its run is not theirs to read" in (
        response.content.decode().replace("&#x27;", "'"))
    assert client.post(f"/inbox/questions/{pending.pk}/assign/", {"username": "ann"},
                       headers=HTMX).status_code == 200
    pending.refresh_from_db()
    assert pending.assigned_to == a


def test_b_is_not_told_of_a_s_question(settings, owners):
    a, b, _lead, pending, _answered = owners
    settings.PLANWATCH = {**settings.PLANWATCH, "NOTIFY_EMAIL": True, "WEBHOOK_URL": ""}
    assert [u.username for u in notices.recipients(pending)] == ["ann", "lea"]
    html, newest = inbox.browser_notices(user=b, after=0)
    assert (html, newest) == ("", 0)
    html, newest = inbox.browser_notices(user=a, after=0)
    assert newest == pending.pk and "Which region is the market in?" in html
