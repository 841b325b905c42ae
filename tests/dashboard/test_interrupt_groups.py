"""Who answers: a question for a group is answered by its members and superusers only, the
same on the pages, /api/ and /langgraph/; "I'm on it", and a lead reassigning."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission

import tests.dashboard.interrupt_graphs  # noqa: F401  (registers test.ask)
from dashboard import services
from dashboard.models import Interrupt, InterruptGroup
from dashboard.web.presentation import inbox
from planner.spec import answer_groups
from tests.conftest import wait_run
from tests.dashboard.inbox_support import REGION, waiting

pytestmark = [pytest.mark.django_db]  # the policy and groups are ORM filters: one pass

HTMX = {"HX-Request": "true"}
REFUSAL = "this question is for the group 'finance'; only its members (and superusers)"


@pytest.fixture
def finance(django_user_model):
    group = Group.objects.create(name="finance")
    fay = django_user_model.objects.create_user(username="fay", password="pw-fay-1234")
    # a member of the team (dashboard.policy: sees everyone's runs) in the finance group
    fay.user_permissions.set(Permission.objects.filter(
        codename__in=["answer_interrupt", "view_all_threads"]))
    fay.groups.add(group)
    return fay


def for_finance(user, n: int = 1) -> list[Interrupt]:
    asked = waiting(n, REGION, asked_ago=timedelta(minutes=1), user=user)
    InterruptGroup.objects.bulk_create([InterruptGroup(interrupt=i, name="finance")
                                        for i in asked])
    return asked


def test_the_groups_of_a_question_come_from_its_value_else_the_graphs_declaration():
    declared = {"market.price": ("finance",), "region": ("sales",), "*": ("ops",)}
    assert answer_groups(declared, {"field": "x", "groups": ["leads", "leads"]}) == ("leads",)
    assert answer_groups(declared, {"field": "x", "groups": "leads"}) == ("leads",)
    assert answer_groups(declared, {"field": "market.price", "kind": "number"}) == ("finance",)
    assert answer_groups(declared, {"field": "core.region", "kind": "region"}) == ("sales",)
    assert answer_groups(declared, "Which city?") == ("ops",)
    assert answer_groups({}, {"field": "x"}) == ()


def test_a_non_member_is_refused_on_the_page_naming_the_group(client, operator, finance):
    (asked,) = for_finance(operator)
    client.force_login(operator)
    response = client.post(f"/runs/{asked.run_id}/interrupts/",
                           {f"i{asked.pk}-answer": "Germany", "submit": asked.pk},
                           headers=HTMX)
    assert response.status_code == 403
    assert REFUSAL in response.content.decode().replace("&#x27;", "'")
    asked.refresh_from_db()
    assert asked.status == Interrupt.Status.PENDING


def test_a_non_member_is_refused_by_the_api_and_a_member_answers(client, operator, finance):
    (asked,) = for_finance(operator)
    client.force_login(operator)
    response = client.post(f"/api/interrupts/{asked.pk}/answer/", {"answer": "Germany"},
                           content_type="application/json")
    assert response.status_code == 403, response.content
    assert REFUSAL in response.json()["detail"]
    assert response.json()["code"] == "not_your_question"
    client.force_login(finance)
    response = client.post(f"/api/interrupts/{asked.pk}/answer/", {"answer": "Germany"},
                           content_type="application/json")
    assert response.status_code == 200, response.content
    asked.refresh_from_db()
    assert (asked.status, asked.answerer_name, asked.answered_via) == (
        Interrupt.Status.ANSWERED, "fay", Interrupt.Channel.API)


def test_a_non_member_is_refused_by_the_langgraph_resume(client, operator, finance):
    (asked,) = for_finance(operator)
    client.force_login(operator)
    response = client.post(f"/langgraph/threads/{asked.run_id}/runs",
                           json.dumps({"assistant_id": "acquisition",
                                       "command": {"resume": "Germany"}}),
                           content_type="application/json")
    assert response.status_code == 403, response.content
    assert REFUSAL in response.content.decode()
    asked.refresh_from_db()
    assert asked.status == Interrupt.Status.PENDING


def test_a_superuser_may_answer_any_groups_question(client, django_user_model, operator):
    (asked,) = for_finance(operator)
    boss = django_user_model.objects.create_superuser(username="root", password="pw-root-1234")
    client.force_login(boss)
    response = client.post(f"/runs/{asked.run_id}/interrupts/",
                           {f"i{asked.pk}-answer": "Germany", "submit": asked.pk},
                           headers=HTMX)
    assert response.status_code == 200
    asked.refresh_from_db()
    assert asked.status == Interrupt.Status.ANSWERED
    assert asked.answered_via == Interrupt.Channel.PAGE


def test_answering_many_refuses_each_question_of_a_group_not_mine(client, operator, finance):
    asked = for_finance(operator, 2)
    client.force_login(operator)
    html = client.post("/inbox/answer/", {
        "prefix": f"g{asked[0].pk}", f"g{asked[0].pk}-answer": "Germany",
        "interrupt": [str(i.pk) for i in asked]}, headers=HTMX).content.decode()
    assert "0 of 2 answered; 2 refused" in html.replace("&#x27;", "'")
    assert REFUSAL in html.replace("&#x27;", "'")


def test_i_am_on_it_shows_who_has_it_and_a_lead_reassigns(client, operator, finance,
                                                          django_user_model):
    (asked,) = for_finance(operator)
    client.force_login(finance)
    page = client.get(f"/runs/{asked.run_id}/interrupts/", headers=HTMX).content.decode()
    assert "for finance" in page and "I'm on it" in page
    assert client.post(f"/inbox/questions/{asked.pk}/take/", headers=HTMX).status_code == 200
    # the others see who has it, in the list and on the form; they cannot take it
    client.force_login(operator)
    assert "fay is on it" in client.get(f"/runs/{asked.run_id}/interrupts/",
                                        headers=HTMX).content.decode()
    taken = client.post(f"/inbox/questions/{asked.pk}/take/", headers=HTMX)
    assert taken.status_code == 403  # not a member of finance
    # a lead (the permission) gives it to another member
    lead = django_user_model.objects.create_user(username="lea", password="pw-lea-1234")
    lead.user_permissions.set(Permission.objects.filter(
        codename__in=["answer_interrupt", "assign_interrupt", "view_all_threads"]))
    other = django_user_model.objects.create_user(username="finn", password="pw-finn-1234")
    other.user_permissions.set(Permission.objects.filter(
        codename__in=["answer_interrupt", "view_all_threads"]))
    other.groups.add(Group.objects.get(name="finance"))
    client.force_login(lead)
    page = client.get(f"/runs/{asked.run_id}/interrupts/", headers=HTMX).content.decode()
    assert '<option value="finn">finn</option>' in page and ">olga<" not in page
    response = client.post(f"/inbox/questions/{asked.pk}/assign/",
                           {f"username-{asked.pk}": "finn"}, headers=HTMX)
    assert response.status_code == 200 and "Given to finn." in response.content.decode()
    asked.refresh_from_db()
    assert asked.assigned_to == other and asked.assigned_by_name == "lea"
    # not a lead: refused, naming the permission
    client.force_login(finance)
    refused = client.post(f"/inbox/questions/{asked.pk}/assign/",
                          {f"username-{asked.pk}": "fay"}, headers=HTMX)
    assert refused.status_code == 403 and "dashboard.assign_interrupt" in \
        refused.content.decode().replace("&#x27;", "'")


def test_the_inbox_lists_mine_and_my_groups(client, operator, finance):
    mine = for_finance(operator, 3)
    everyone = waiting(4, {**REGION, "label": "Other"}, user=operator)
    services.interrupt_take(interrupt=mine[0], user=finance)
    context = inbox.inbox_context(user=finance, filters={"assigned": "groups"})
    assert [r.pk for r in context["rows"]] == [i.pk for i in mine]
    context = inbox.inbox_context(user=finance, filters={"assigned": "me"})
    assert [r.pk for r in context["rows"]] == [mine[0].pk]
    context = inbox.inbox_context(user=finance, filters={"assigned": "free"})
    assert len(context["rows"]) == 6 and mine[0].pk not in [r.pk for r in context["rows"]]
    assert len(inbox.inbox_context(user=finance, filters={})["rows"]) == 7
    assert everyone


@pytest.mark.django_db(transaction=True)
def test_a_question_asked_for_a_group_in_its_value_is_recorded_so(executor, operator):
    run = services.run_create(graph="test.ask", input={"payload": {
        "field": "t", "prompt": "Budget?", "kind": "text", "groups": ["finance"]}},
        user=operator)
    run = wait_run(run.id)
    asked = run.interrupts.get()
    assert asked.group_names == ["finance"]
    with pytest.raises(services.AnswerForbidden, match="'finance'"):
        services.interrupt_answer(interrupt=asked, answer="10", user=operator)
