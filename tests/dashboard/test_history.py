"""The history of questions: answered and withdrawn ones with who, channel, times and
waits, filtered, exported as CSV and served by the API, with median and p90 answer times."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.models import Interrupt
from tests.dashboard.inbox_support import AUDIENCE, REGION, waiting

pytestmark = [pytest.mark.pg, pytest.mark.django_db]

WAITS = [10, 20, 30, 40, 100]  # seconds: median 30, p90 (nearest rank) 100


@pytest.fixture
def history(operator):
    asked_at = timezone.now() - timedelta(hours=1)
    regions = waiting(len(WAITS), REGION, user=operator)
    for interrupt, wait in zip(regions, WAITS, strict=True):
        Interrupt.objects.filter(pk=interrupt.pk).update(
            created_at=asked_at, status=Interrupt.Status.ANSWERED, answer="Germany",
            answered_by=operator, answered_by_name="olga",
            answered_at=asked_at + timedelta(seconds=wait),
            answered_via=Interrupt.Channel.API if wait == 100 else Interrupt.Channel.PAGE)
    (audience,) = waiting(1, AUDIENCE, graph="decomposition", goal="Brief on")
    Interrupt.objects.filter(pk=audience.pk).update(status=Interrupt.Status.CANCELLED)
    waiting(1, REGION, goal="Still waiting")  # pending: not history
    return regions, audience


def test_the_page_shows_who_channel_times_waits_and_answer_times(client, operator, history):
    regions, audience = history
    client.force_login(operator)
    page = client.get("/inbox/history/").content.decode()
    assert "6 questions" in page and "Still waiting" not in page
    slowest = page[page.index(f'id="history-{regions[4].pk}"'):]
    slowest = slowest[:slowest.index("</tr>")]
    assert "olga" in slowest and "REST API" in slowest and "1 min" in slowest
    assert "Germany" in slowest
    times = page[page.index("Time to answer"):page.index("</table>")]
    assert "Region" in times and ">5<" in times and ">30 s<" in times and ">1 min<" in times
    withdrawn = page[page.index(f'id="history-{audience.pk}"'):]
    assert "withdrawn" in withdrawn[:withdrawn.index("</tr>")]


def test_filters_narrow_the_history(client, operator, history):
    regions, audience = history
    client.force_login(operator)
    page = client.get("/inbox/history/?outcome=withdrawn").content.decode()
    assert f'id="history-{audience.pk}"' in page and f'id="history-{regions[0].pk}"' not in page
    page = client.get("/inbox/history/?via=api").content.decode()
    assert page.count('class="history-answered"') == 1
    page = client.get("/inbox/history/?graph=decomposition&q=brief").content.decode()
    assert page.count('<tr id="history-') == 1


def test_the_csv_export_has_every_row_and_the_waits(client, operator, history):
    client.force_login(operator)
    response = client.get("/inbox/history.csv?outcome=answered")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert sorted(float(r["waited_seconds"]) for r in rows) == WAITS
    assert {r["answered_by"] for r in rows} == {"olga"}
    assert {r["channel"] for r in rows} == {"page", "api"}


def test_the_api_serves_the_history_and_the_answer_times(client, operator, history):
    client.force_login(operator)
    body = client.get("/api/interrupts/history/?graph=acquisition").json()
    assert body["count"] == 5 and len(body["results"]) == 5
    (times,) = body["answer_times"]
    assert (times["answered"], times["median_seconds"], times["p90_seconds"]) == (5, 30, 100)
    assert client.get("/api/interrupts/history/?outcome=lost").status_code == 400


@pytest.mark.parametrize("answer", ["=1+1", "+1", "-1", "@SUM(A1)", "\t=1+1", "\r=1+1",
                                    "\n=1", "  =1+1", "\uff1d1+1"])
def test_the_csv_leads_every_formula_start_with_an_apostrophe(client, operator, answer):
    """OWASP's list (``=`` ``+`` ``-`` ``@`` tab, carriage return), after leading spaces
    too: a spreadsheet shows the answer as written, never runs it."""
    (asked,) = waiting(1, REGION, user=operator)
    Interrupt.objects.filter(pk=asked.pk).update(
        status=Interrupt.Status.ANSWERED, answer=answer, answered_by=operator,
        answered_at=timezone.now())
    client.force_login(operator)
    response = client.get("/inbox/history.csv")
    (row,) = csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode(),
                                        newline=""))
    assert row["answer"] == f"'{answer}"


def test_the_csv_keeps_an_ordinary_answer_as_written(client, operator):
    (asked,) = waiting(1, REGION, user=operator)
    Interrupt.objects.filter(pk=asked.pk).update(
        status=Interrupt.Status.ANSWERED, answer="Germany, 3 = enough", answered_by=operator,
        answered_at=timezone.now())
    client.force_login(operator)
    response = client.get("/inbox/history.csv")
    (row,) = csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))
    assert row["answer"] == "Germany, 3 = enough"
