"""The inbox with many questions: searched, filtered and paged in SQL, grouped by question
across runs, compact rows, and one answer sent to many runs (each checked, each once)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.models import Interrupt
from dashboard.web.forms.inbox import PAGE_SIZE
from dashboard.web.presentation import inbox
from dashboard.web.templatetags.planwatch import age_text
from tests.dashboard.inbox_support import AUDIENCE, REGION, waiting

pytestmark = [pytest.mark.pg, pytest.mark.django_db]

HTMX = {"HX-Request": "true"}


def rows_of(page: str) -> list[str]:
    return re.findall(r'<tr id="inbox-row-(\d+)" class="inbox-item', page)


@pytest.fixture
def many(operator):
    regions = waiting(30, REGION, goal="Bikes in", asked_ago=timedelta(hours=2))
    audiences = waiting(30, AUDIENCE, graph="decomposition", goal="Brief on",
                        asked_ago=timedelta(seconds=40))
    return regions, audiences


def test_many_questions_are_compact_rows_grouped_by_question_oldest_first(client, operator,
                                                                           many):
    regions, audiences = many
    client.force_login(operator)
    page = client.get("/inbox/").content.decode()
    assert 'id="inbox-runs">\n  \n</div>' in page or 'class="inbox-run"' not in page  # no forms
    assert 'class="question pending' not in page
    shown = rows_of(page)
    assert len(shown) == PAGE_SIZE
    # the region group (asked two hours ago) first, then the audience group
    assert shown[:30] == [str(r.pk) for r in regions]
    assert shown[30:] == [str(a.pk) for a in audiences[:PAGE_SIZE - 30]]
    assert page.count('class="inbox-group"') == 2
    assert "30 waiting" in page and "60 questions waiting</span>; 1\u201350 listed here" in page
    # the second page, in SQL: the rest of the audience group
    second = client.get("/inbox/?page=2").content.decode()
    assert rows_of(second) == [str(a.pk) for a in audiences[PAGE_SIZE - 30:]]


def test_newest_first_puts_the_newest_group_first(client, operator, many):
    _, audiences = many
    client.force_login(operator)
    shown = rows_of(client.get("/inbox/?sort=newest").content.decode())
    assert shown[:30] == [str(a.pk) for a in reversed(audiences)]


def test_search_finds_goals_questions_and_run_ids(client, operator, many):
    regions, audiences = many
    client.force_login(operator)
    assert rows_of(client.get("/inbox/?q=brief+on+1").content.decode()) == [
        str(a.pk) for a in audiences if re.search(r"Brief on 1\d?$", a.run.input["goal"])]
    assert len(rows_of(client.get("/inbox/?q=AUDIENCE").content.decode())) == 30
    rid = str(regions[7].run_id)[:8]
    page = client.get(f"/inbox/?q={rid}").content.decode()
    assert str(regions[7].pk) in re.findall(r'id="inbox-row-(\d+)"', page)


def test_filters_by_graph_question_and_age(client, operator, many):
    regions, _ = many
    client.force_login(operator)
    assert len(rows_of(client.get("/inbox/?graph=decomposition").content.decode())) == 30
    page = client.get("/inbox/?question=Region").content.decode()
    assert rows_of(page) == [str(r.pk) for r in regions]
    assert len(rows_of(client.get("/inbox/?older_than=1h").content.decode())) == 30
    bad = client.get("/inbox/?older_than=forever")
    assert bad.status_code == 200 and "forever" in bad.content.decode()


def test_one_answer_goes_to_the_selected_runs_each_checked_and_recorded_once(
        client, operator, many):
    regions, _ = many
    client.force_login(operator)
    chosen = regions[:20]
    data = {"prefix": f"g{regions[0].pk}", f"g{regions[0].pk}-answer": "Germany",
            "interrupt": [str(i.pk) for i in chosen]}
    response = client.post("/inbox/answer/", data, headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and "20 of 20 answered" in html
    assert html.count('<li class="ok">') == 20 and "answered; the run continues" in html
    answered = Interrupt.objects.filter(status=Interrupt.Status.ANSWERED)
    assert sorted(answered.values_list("pk", flat=True)) == sorted(i.pk for i in chosen)
    assert set(answered.values_list("answer", flat=True)) == {"Germany"}
    # sent again: each is refused as answered already, none is answered twice
    again = client.post("/inbox/answer/", data, headers=HTMX).content.decode()
    assert "0 of 20 answered; 20 refused" in again and "already answered by olga" in again
    assert answered.count() == 20


def test_an_answer_the_graph_refuses_is_sent_to_none(client, operator, many):
    regions, _ = many
    client.force_login(operator)
    data = {"prefix": f"g{regions[0].pk}", f"g{regions[0].pk}-answer": "Atlantis",
            "interrupt": [str(i.pk) for i in regions[:3]]}
    html = client.post("/inbox/answer/", data, headers=HTMX).content.decode()
    assert "0 of 3 answered; 3 refused" in html and "not sent:" in html
    assert not Interrupt.objects.filter(status=Interrupt.Status.ANSWERED).exists()


def test_answering_many_without_javascript_renders_the_inbox_with_the_results(
        client, operator, many):
    regions, _ = many
    client.force_login(operator)
    data = {"prefix": f"g{regions[0].pk}", f"g{regions[0].pk}-answer": "France",
            "interrupt": [str(regions[0].pk)]}
    page = client.post("/inbox/answer/", data).content.decode()
    assert "<title>" in page and "1 of 1 answered" in page


def test_a_viewer_may_not_answer_many(client, viewer, many):
    regions, _ = many
    client.force_login(viewer)
    data = {"prefix": f"g{regions[0].pk}", f"g{regions[0].pk}-answer": "France",
            "interrupt": [str(regions[0].pk)]}
    assert client.post("/inbox/answer/", data, headers=HTMX).status_code == 403
    assert not Interrupt.objects.filter(status=Interrupt.Status.ANSWERED).exists()


@pytest.mark.parametrize(("seconds", "text"), [(0, "0 s"), (40, "40 s"), (59, "59 s"),
                                               (60, "1 min"), (3599, "59 min"), (3600, "1 h"),
                                               (3660, "1 h 1 min"), (86400, "1 d")])
def test_ages_are_true_below_a_minute(seconds, text):
    assert age_text(seconds) == text


def test_a_question_says_how_many_seconds_it_has_waited(client, operator, many):
    client.force_login(operator)
    page = client.get("/inbox/?graph=decomposition").content.decode()
    assert re.search(r'data-since="[^"]+">4\d s</span>', page)


def test_a_compact_page_is_told_what_changed_not_redrawn_under_the_operator(operator, many):
    regions, _ = many
    loaded = timezone.now()
    shown = frozenset(i.pk for i in regions)
    Interrupt.objects.filter(pk__in=[regions[0].pk, regions[1].pk]).update(
        status=Interrupt.Status.CANCELLED)
    waiting(1, REGION, asked_ago=timedelta(0), goal="New")
    html, _ = inbox.inbox_update(user=operator, known={}, filters={}, compact=True,
                                 shown=shown, since=loaded - timedelta(seconds=30))
    assert 'id="inbox-table"' not in html and 'id="inbox-stale" hx-swap-oob="true"' in html
    assert "2 of the questions listed here were answered or withdrawn" in html
    assert "1 new question is waiting" in html


def test_after_an_answer_to_many_the_page_counts_what_still_waits(client, operator, many):
    regions, _ = many
    client.force_login(operator)
    prefix = f"g{regions[0].pk}"
    page = client.get("/inbox/").content.decode()
    assert '<span id="inbox-count">60 questions waiting</span>' in page
    assert f'id="count-{prefix}">30 waiting<' in page
    data = {"prefix": prefix, f"{prefix}-answer": "Germany", "filters": "",
            "graph": "acquisition", "question": re.search(
                r'name="question" value="([^"]*)"', page).group(1),
            "interrupt": [str(i.pk) for i in regions[:20]]}
    html = client.post("/inbox/answer/", data, headers=HTMX).content.decode()
    assert '<span id="inbox-count" hx-swap-oob="true">40 questions waiting</span>' in html
    assert f'id="count-{prefix}" hx-swap-oob="true">10 waiting<' in html


def test_an_answer_to_many_starts_empty_not_with_one_runs_suggestion(client, operator):
    asked = waiting(6, {**REGION, "suggested": "Germany"}, asked_ago=timedelta(minutes=3))
    client.force_login(operator)
    page = client.get("/inbox/").content.decode()
    box = re.search(rf'<input[^>]*name="g{asked[0].pk}-answer"[^>]*>', page).group(0)
    assert 'value=' not in box, box
