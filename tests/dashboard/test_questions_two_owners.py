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


def test_b_may_not_answer_a_s_question_through_the_inbox_s_bulk_form(client, owners):
    """The bulk answer draws its questions through the policy: guessed ids of A's questions,
    posted by B with a valid CSRF session, answer nothing (issue 50, item 1)."""
    _a, b, _lead, pending, _answered = owners
    (mine,) = waiting(1, REGION, goal="Bob bikes", user=b)
    client.force_login(b)
    guessed = list(range(max(pending.pk, mine.pk) + 5))  # every id up to past both
    response = client.post("/inbox/answer/", {
        "interrupt": guessed, "prefix": f"g{pending.pk}", f"g{pending.pk}-answer": "Germany"},
        headers=HTMX)
    assert response.status_code == 200
    pending.refresh_from_db()
    assert pending.status == Interrupt.Status.PENDING and pending.answer is None
    mine.refresh_from_db()  # B's own question, in the same request, is answered
    assert mine.status == Interrupt.Status.ANSWERED and mine.answer == "Germany"
    assert "not yours to see" in response.content.decode()
    only_a_s = client.post("/inbox/answer/", {
        "interrupt": [pending.pk], "prefix": "g1", "g1-answer": "Europe"}, headers=HTMX)
    assert only_a_s.status_code == 404
    pending.refresh_from_db()
    assert pending.status == Interrupt.Status.PENDING


def test_the_answer_service_refuses_who_may_not_read_the_run(owners):
    """Every door that answers goes through ``interrupt_answer``, which asks the policy too."""
    from dashboard import services
    _a, b, _lead, pending, _answered = owners
    with pytest.raises(services.AnswerForbidden, match="a run you may not read"):
        services.interrupt_answer(interrupt=pending, answer="Europe", user=b)
    pending.refresh_from_db()
    assert pending.status == Interrupt.Status.PENDING


def test_a_lead_outside_the_question_s_group_gets_no_answer_form(client, owners):
    """A question for a group: a lead (team, assign) outside it reads it, may give it to a
    member, but its answer field and button are disabled, with the reason."""
    from django.contrib.auth.models import Group

    from dashboard.models import InterruptGroup
    _a, _b, lead, pending, _answered = owners
    InterruptGroup.objects.create(interrupt=pending, name="finance")
    Group.objects.get_or_create(name="finance")
    client.force_login(lead)
    page = client.get(f"/runs/{pending.run_id}/interrupts/", headers=HTMX).content.decode()
    assert 'class="q-input" disabled' in page
    assert '<button type="submit" class="primary" disabled>Answer</button>' in page
    assert "only its members (and superusers) may answer" in page.replace("&#x27;", "'")
    lead.groups.add(Group.objects.get(name="finance"))
    lead = type(lead).objects.get(pk=lead.pk)
    client.force_login(lead)
    page = client.get(f"/runs/{pending.run_id}/interrupts/", headers=HTMX).content.decode()
    assert 'class="q-input" disabled' not in page and "only its members" not in page
