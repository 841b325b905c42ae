"""The inbox: questions named by their title and linked to their forms, the count in the
page's title, and a run keeping its place with a confirmation once it is answered."""

from __future__ import annotations

import re
import uuid

import pytest
from django.utils import timezone

from dashboard.models import Interrupt, Run
from dashboard.web.presentation import inbox

pytestmark = pytest.mark.django_db

REGION = {"field": "core.region", "label": "Region", "prompt": "Which region is the market in?",
          "kind": "region", "choices": ["Germany", "France"], "attempt": 1, "max_attempts": 3}
# a decomposition's clarify task: its field is the task id, it gives no title
AUDIENCE = {"field": "5", "prompt": "Who is the audience of the briefing?", "kind": "text",
            "task_id": "5", "attempt": 1}


def asking(*payloads, graph: str = "acquisition") -> tuple[Run, list[Interrupt]]:
    run = Run.objects.create(graph=graph, thread_id=f"{uuid.uuid4()}:planner",
                             state=Run.State.INTERRUPTED, input={"goal": "Bikes in Porto"})
    return run, [ask(run, p) for p in payloads]


def ask(run: Run, payload: dict) -> Interrupt:
    return Interrupt.objects.create(run=run, interrupt_id=uuid.uuid4().hex, node="ask_user",
                                    payload=payload)


def answer(interrupt: Interrupt, user, value: str) -> None:
    Interrupt.objects.filter(pk=interrupt.pk).update(
        status=Interrupt.Status.ANSWERED, answer=value, answered_by=user,
        answered_at=timezone.now())


def test_rows_name_questions_by_their_title_and_link_to_their_forms(client, operator):
    _, (region,) = asking(REGION)
    _, (audience,) = asking(AUDIENCE, graph="decomposition")
    client.force_login(operator)
    page = client.get("/inbox/").content.decode()
    table = page[page.index('id="inbox-table"'):page.index('id="inbox-runs"')]
    assert (f'<a href="#interrupt-{region.pk}" class="inbox-question"><strong>Region</strong>: '
            "Which region is the market in?</a>") in table
    assert (f'<a href="#interrupt-{audience.pk}" class="inbox-question">'
            "Who is the audience of the briefing?</a>") in table
    assert "core.region" not in table and ">5<" not in table
    # each link lands on its form, further down the same page
    assert f'id="interrupt-{region.pk}"' in page and f'id="interrupt-{audience.pk}"' in page


def test_the_page_title_counts_the_questions_waiting(client, operator):
    client.force_login(operator)
    assert "<title>Inbox · Planwatch</title>" in client.get("/inbox/").content.decode()
    asking(REGION, AUDIENCE)
    asking(REGION)
    page = client.get("/inbox/").content.decode()
    assert "<title>(3) Inbox · Planwatch</title>" in page and "data-title-count" in page


def test_ids_and_attempts_are_folded_under_details_not_in_the_question_head(client, operator):
    run, _ = asking(REGION)
    client.force_login(operator)
    page = client.get(f"/runs/{run.id}/interrupts/").content.decode()
    head = page[page.index('class="q-head"'):page.index('class="q-prompt"')]
    shown = re.sub(r"<details.*?</details>", "", head, flags=re.S)
    assert "Region" in shown
    assert "core.region" not in shown and "ask_user" not in shown and "attempt" not in shown
    folded = re.search(r"<details class=\"q-ids\">.*?</details>", head, flags=re.S).group(0)
    assert "core.region" in folded and "ask_user" in folded and "1 of 3" in folded


def test_an_answered_run_keeps_its_place_saying_so_then_a_new_question_comes_back_there(
        operator):
    run, (region,) = asking(REGION)
    other, _ = asking(AUDIENCE)
    _, known = inbox.inbox_update(user=operator, graph="", known=None)
    answer(region, operator, "Germany")
    html, known = inbox.inbox_update(user=operator, graph="", known=known)
    article = re.search(rf'<article class="inbox-run inbox-closed" id="inbox-run-{run.id}" '
                        r'hx-swap-oob="true">.*?</article>', html, flags=re.S)
    assert article, html
    assert "Answered by olga — the run continues." in article.group(0)
    assert 'hx-swap-oob="delete"' not in html and f'id="inbox-run-{other.id}"' not in html
    # nothing new: the confirmation is not sent again
    html, known = inbox.inbox_update(user=operator, graph="", known=known)
    assert f'id="inbox-run-{run.id}"' not in html
    # the run asks again: its forms replace the confirmation in place, not at the bottom
    ask(run, {**REGION, "field": "core.currency", "label": "Currency"})
    html, known = inbox.inbox_update(user=operator, graph="", known=known)
    assert re.search(rf'<article class="inbox-run" id="inbox-run-{run.id}" '
                     r'hx-swap-oob="true">', html)
    assert "beforeend:#inbox-runs" not in html


def test_a_withdrawn_question_does_not_claim_an_answer(operator):
    _, (region,) = asking(REGION)
    _, known = inbox.inbox_update(user=operator, graph="", known=None)
    Interrupt.objects.filter(pk=region.pk).update(status=Interrupt.Status.CANCELLED)
    html, _ = inbox.inbox_update(user=operator, graph="", known=known)
    assert "No question waits any more: the run was cancelled or moved on." in html
    assert "Answered" not in html
