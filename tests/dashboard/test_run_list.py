"""The runs list: search, filters, date range, Started and Duration columns, sorting, paging;
the filters kept in every link, and the same filters on the runs API."""

from __future__ import annotations

import html
import re
import uuid
from datetime import UTC, date, datetime, timedelta

import pytest
from django.template.loader import render_to_string
from django.test import Client

import tests.dashboard.survey_graph  # noqa: F401  (registers test.survey: its goal is "topic")
from dashboard import selectors
from dashboard.models import Run
from dashboard.web.views.runs import RUNS_PER_PAGE
from tests.conftest import api_token

pytestmark = [pytest.mark.pg, pytest.mark.django_db]

T0 = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)


def make_run(goal: str = "", *, graph: str = "acquisition", state: str = Run.State.SUCCEEDED,
             created: datetime = T0, took: float | None = 10.0, **input_values) -> Run:
    """A run stored as the engine leaves it: created (then started) at ``created``,
    finished ``took`` seconds later (None: not started yet)."""
    values = {"goal": goal, **input_values} if goal else input_values
    run = Run.objects.create(graph=graph, thread_id=f"{uuid.uuid4()}:planner", state=state,
                             input=values)
    started = created if took is not None else None
    finished = created + timedelta(seconds=took) if took is not None else None
    Run.objects.filter(id=run.id).update(created_at=created, started_at=started,
                                         finished_at=finished)
    run.refresh_from_db()
    return run


def listed(client: Client, query: str = "", **headers) -> tuple[int, str, list[str]]:
    """The status, the page and the ids of the rows the list shows, in order."""
    response = client.get(f"/{query}", headers=headers)
    page = response.content.decode()
    return response.status_code, page, re.findall(r'<tr id="run-([0-9a-f-]{36})">', page)


@pytest.fixture
def signed_in(client, operator) -> Client:
    client.force_login(operator)
    return client


def test_search_finds_words_of_the_goal_in_any_case_and_the_start_of_an_id(signed_in):
    porto = make_run("E-bike rentals in Porto")
    lisbon = make_run("Coffee carts in Lisbon", created=T0 + timedelta(hours=1))
    # a graph whose goal is its first text field (no "goal" key) is found by it too
    brief = make_run(graph="test.survey", created=T0 + timedelta(hours=2),
                     topic="The porto wine of the year")
    assert listed(signed_in, "?q=porto")[2] == [str(brief.id), str(porto.id)]
    assert listed(signed_in, "?q=%20LISBON%20")[2] == [str(lisbon.id)]
    assert listed(signed_in, f"?q={str(lisbon.id)[:8]}")[2] == [str(lisbon.id)]
    status, page, ids = listed(signed_in, "?q=tokyo")
    assert status == 200 and ids == [] and "No run matches these filters" in page


def test_a_search_with_like_wildcards_matches_them_literally(signed_in):
    make_run("Market for 100% recycled paper")
    make_run("Market for 100 bikes", created=T0 + timedelta(hours=1))
    assert len(listed(signed_in, "?q=100%25")[2]) == 1
    assert listed(signed_in, "?q=_")[2] == []


def test_filters_by_graph_status_and_the_days_started(signed_in):
    day1 = make_run("one", created=datetime(2026, 11, 18, 23, 59, tzinfo=UTC))
    day2 = make_run("two", created=datetime(2026, 11, 19, 0, 0, tzinfo=UTC),
                    state=Run.State.FAILED)
    day3 = make_run("three", graph="decomposition",
                    created=datetime(2026, 11, 20, 12, 0, tzinfo=UTC))
    assert listed(signed_in, "?since=2026-11-19")[2] == [str(day3.id), str(day2.id)]
    assert listed(signed_in, "?until=2026-11-19")[2] == [str(day2.id), str(day1.id)]
    assert listed(signed_in, "?since=2026-11-19&until=2026-11-19")[2] == [str(day2.id)]
    assert listed(signed_in, "?status=failed")[2] == [str(day2.id)]
    assert listed(signed_in, "?graph=decomposition&since=2026-11-18")[2] == [str(day3.id)]


@pytest.mark.parametrize("query, words", [
    ("?since=2026-13-45", "'2026-13-45' is not a date; give one as YYYY-MM-DD"),
    ("?until=yesterday", "'yesterday' is not a date; give one as YYYY-MM-DD"),
    ("?since=2026-11-20&until=2026-11-19",
     "the range ends (2026-11-19) before it starts (2026-11-20); swap the two dates"),
    ("?status=done", "Select a valid choice"),
])
def test_a_bad_filter_is_named_above_the_list_never_a_500(signed_in, query, words):
    run = make_run("kept")
    status, page, ids = listed(signed_in, query)
    assert status == 400
    errors = html.unescape(page[page.index('id="run-filter-errors"'):page.index("<table")])
    assert words in errors and "The list is not filtered by it." in errors
    assert ids == [str(run.id)]  # the other filters still apply; the bad one does nothing
    # an htmx request gets the same message in the partial it swaps (htmx swaps only 2xx)
    status, partial, _ = listed(signed_in, query, HX_Request="true")
    assert status == 200 and "<html" not in partial and words in html.unescape(partial)


def test_sorting_by_duration_puts_runs_not_started_last_either_way(signed_in):
    short = make_run("short", took=5)
    long = make_run("long", took=500, created=T0 + timedelta(minutes=1))
    waiting = make_run("queued", took=None, state=Run.State.QUEUED,
                       created=T0 + timedelta(minutes=2))
    assert listed(signed_in, "?sort=-duration")[2] == [str(long.id), str(short.id),
                                                        str(waiting.id)]
    _, page, ids = listed(signed_in, "?sort=duration")
    assert ids == [str(short.id), str(long.id), str(waiting.id)]
    assert 'class="col-duration" aria-sort="ascending"' in page
    row = page[page.index(f'id="run-{long.id}"'):]
    assert re.search(r'class="col-duration num"[^>]*><span>8 min 20 s<', row)
    assert "20 Nov 2026, 09:31" in row  # Started: the day and time, not only "x ago"


def test_sorting_by_started_oldest_first_and_an_unknown_sort_is_newest_first(signed_in):
    old, new = make_run("old"), make_run("new", created=T0 + timedelta(days=1))
    assert listed(signed_in, "?sort=started")[2] == [str(old.id), str(new.id)]
    assert listed(signed_in, "?sort=-created_at")[2] == [str(new.id), str(old.id)]
    with pytest.raises(ValueError, match="unknown sort 'age'; use one of: -started"):
        selectors.run_list(user=None, sort="age")


def test_paging_and_sort_links_keep_every_filter(signed_in):
    for n in range(RUNS_PER_PAGE + 2):
        make_run(f"Porto bikes {n}", created=T0 + timedelta(minutes=n))
    make_run("Lisbon", created=T0 + timedelta(hours=5))
    query = "?q=porto&status=succeeded&since=2026-11-20&until=2026-11-21&sort=-duration"
    status, page, ids = listed(signed_in, query)
    assert status == 200 and len(ids) == RUNS_PER_PAGE
    older = html.unescape(re.search(r'<a href="([^"]+)" rel="next">', page).group(1))
    for kept in ("q=porto", "status=succeeded", "since=2026-11-20", "until=2026-11-21",
                 "sort=-duration", "page=2"):
        assert kept in older, (kept, older)
    _, page2, ids2 = listed(signed_in, older[1:])
    assert len(ids2) == 2 and not set(ids2) & set(ids)
    sort_link = html.unescape(re.search(r'<th class="col-started"><a class="sort" href="([^"]+)"',
                                        page2).group(1))
    assert "q=porto" in sort_link and "since=2026-11-20" in sort_link
    assert "sort=-started" in sort_link and "page=" not in sort_link  # a new order: page 1
    # the filter form keeps the sort when a filter changes, and pushes its URL
    assert '<input type="hidden" name="sort" value="-duration">' in page
    assert 'hx-push-url="true"' in page and 'value="porto"' in page


def test_live_new_rows_only_on_the_first_page_of_the_unfiltered_newest_first_list(signed_in):
    make_run("any")
    assert 'id="run-rows-body"' in listed(signed_in)[1]
    for query in ("?q=any", "?since=2026-11-01", "?sort=-duration"):
        assert 'id="run-rows-body"' not in listed(signed_in, query)[1], query


def test_the_status_waiting_for_an_answer_reads_waiting_for_you(signed_in):
    make_run("asks", state=Run.State.INTERRUPTED)
    page = listed(signed_in)[1]
    assert '<span class="badge status-interrupted">Waiting for you</span>' in page
    assert '<option value="interrupted" >Waiting for you</option>' in page
    # and so does the cell a doorbell's summary redraws live (it carries the value only)
    live = render_to_string("dashboard/_run_status_oob.html", {"run": {
        "id": "x", "status": "interrupted", "current_node": "ask_user"}})
    assert '<span class="badge status-interrupted">Waiting for you</span>' in live


# -- the runs API takes the same filters ------------------------------------------------

@pytest.fixture
def api(operator) -> Client:
    return Client(headers={"Authorization": f"Token {api_token(operator)}"})


def test_the_api_searches_and_filters_by_day_as_the_page_does(api):
    porto = make_run("E-bike rentals in Porto")
    make_run("Coffee in Lisbon", created=T0 - timedelta(days=3))

    def ids(**params):
        response = api.get("/api/runs/", params)
        assert response.status_code == 200, response.content
        return [r["id"] for r in response.json()["results"]]

    assert ids(q="PORTO") == [str(porto.id)]
    assert ids(since=T0.date().isoformat()) == [str(porto.id)]
    assert ids(until=(T0.date() - timedelta(days=1)).isoformat()) != [str(porto.id)]
    assert ids(q=str(porto.id)[:8], until=date(2026, 11, 20).isoformat()) == [str(porto.id)]


@pytest.mark.parametrize("params, words", [
    ({"since": "2026-13-45"}, "since: Date has wrong format"),
    ({"since": "2026-11-20", "until": "2026-11-19"}, "swap the two dates"),
])
def test_the_api_names_a_bad_date(api, params, words):
    response = api.get("/api/runs/", params)
    assert response.status_code == 400 and words in response.json()["detail"]
