"""Bad answers and hostile questions: inline errors or escaped text, never a 500 or a resume."""

from __future__ import annotations

import json

import pytest
from django.test import Client

import tests.dashboard.interrupt_graphs  # noqa: F401  (registers test.ask)
from dashboard import services
from dashboard.models import Interrupt, Run
from tests.conftest import wait_run

FINAL = ("succeeded", "failed", "cancelled")
HTMX = {"HX-Request": "true"}
SCRIPT = "<script>alert('x')</script>"


def ask(user, payload) -> tuple[Run, Interrupt]:
    run = services.run_create(graph="test.ask", input={"payload": payload}, user=user)
    run = wait_run(run.id)
    assert run.status == Run.Status.INTERRUPTED, run.error_message
    return run, run.interrupts.get()


def post(client, run, pending, answer, **extra):
    return client.post(f"/runs/{run.id}/interrupts/",
                       {f"i{pending.pk}-answer": answer, "submit": pending.pk, **extra},
                       headers=HTMX)


def assert_unchanged(run, pending) -> None:
    pending.refresh_from_db()
    assert pending.status == Interrupt.Status.PENDING and pending.answer is None
    assert Run.objects.get(id=run.id).status == Run.Status.INTERRUPTED


NUMBER = {"field": "market.price", "label": "Yearly price", "prompt": "What price?",
          "kind": "number", "choices": [], "constraints": {"min": 0, "max": 1000},
          "unit": "EUR per year", "attempt": 1, "max_attempts": 3, "reason": None}


@pytest.mark.parametrize(("answer", "error"), [
    ("", "This field is required."),
    ("   ", "This field is required."),
    ("twelve", "&#x27;twelve&#x27; is not a number; give a number such as 12.5"),
    ("1e999", "is not a finite number"),
    ("1001", "1001 is out of range; give a number from 0 to 1,000"),
    ("-5", "-5 is out of range; give a number from 0 to 1,000"),
    # the refusal quotes what was typed, not the float it parses to (1.2345678901234568e+25)
    ("12345678901234567890123456", "12345678901234567890123456 is out of range"),
])
def test_a_bad_number_gets_an_inline_error_and_nothing_changes(executor, operator, client,
                                                               answer, error):
    run, pending = ask(operator, NUMBER)
    client.force_login(operator)
    response = post(client, run, pending, answer)
    html = response.content.decode()
    assert response.status_code == 422
    assert error in html and 'class="errorlist' in html
    assert f'value="{answer}"' in html or not answer.strip()  # the typed answer is kept
    assert_unchanged(run, pending)


def test_a_good_number_resumes_with_a_number(executor, operator, client):
    run, pending = ask(operator, NUMBER)
    client.force_login(operator)
    assert post(client, run, pending, " 1,000 ").status_code == 200
    assert wait_run(run.id, statuses=FINAL).output == {"answer": 1000}


@pytest.mark.parametrize(("payload", "answer", "stored", "error"), [
    ({"field": "core.currency", "prompt": "Currency?", "kind": "currency",
      "choices": ["EUR", "USD"]}, "eur", "EUR", None),
    ({"field": "core.currency", "prompt": "Currency?", "kind": "currency",
      "choices": ["EUR", "USD"]}, "euro", None,
     "&#x27;euro&#x27; is not an ISO 4217 currency code"),
    ({"field": "core.currency", "prompt": "Currency?", "kind": "currency",
      "choices": ["EUR", "USD"]}, "XYZ", None,  # three letters, but no ISO code: refused
     "&#x27;XYZ&#x27; is not an ISO 4217 currency code"),
    ({"field": "core.region", "prompt": "Region?", "kind": "region",
      "choices": ["Germany", "France"]}, "Mars", None, "unknown region &#x27;Mars&#x27;"),
    ({"field": "5", "prompt": "Audience?", "kind": "choice",
      "choices": ["residents", "investors"]}, "residents", "residents", None),
    ({"field": "6", "prompt": "Tone?", "kind": "text", "constraints": {"min_length": 1}},
     "warm", "warm", None),
    # a question asked as plain text names no schema: its answer is the text as typed
    ("Bare question?", '{"ok": [1, 2]}', '{"ok": [1, 2]}', None),
    ("Bare question?", "Lisbon", "Lisbon", None),
    ({"question": "No kind"}, "{not json", None, "not valid JSON"),
    # numbers no checkpoint holds: refused at the form, named, as the JSON API refuses them
    ({"question": "No kind"}, '{"n": [100000000000000000000000]}', None,
     "answer.n[0] holds an integer beyond 64 bits"),
    ({"question": "No kind"}, "1e400", None, "answer is a number too large"),
    ({"question": "No kind"}, '{"n": NaN}', None, "answer holds NaN"),
    (["a", "list", 3], '"yes"', "yes", None),
])
def test_each_kind_validates_its_answer(executor, operator, client, payload, answer, stored,
                                        error):
    run, pending = ask(operator, payload)
    client.force_login(operator)
    response = post(client, run, pending, answer)
    html = response.content.decode()
    if error:
        assert response.status_code == 422 and error in html
        assert_unchanged(run, pending)
    else:
        assert response.status_code == 200, html
        assert wait_run(run.id, statuses=FINAL).output == {"answer": stored}


def test_an_unknown_payload_is_shown_raw_and_escaped(executor, operator, client):
    run, _ = ask(operator, {"pick": f"one {SCRIPT}"})
    client.force_login(operator)
    html = client.get(f"/runs/{run.id}/interrupts/").content.decode()
    assert SCRIPT not in html
    assert "one &lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "Answer (JSON)" in html


def test_a_plain_text_question_is_its_own_label_escaped(executor, operator, client):
    run, _ = ask(operator, f"Pick one {SCRIPT}")
    client.force_login(operator)
    html = client.get(f"/runs/{run.id}/interrupts/").content.decode()
    assert SCRIPT not in html
    assert "Pick one &lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "Answer (JSON)" not in html


def test_html_in_the_question_and_the_answer_is_escaped(executor, operator, client):
    payload = {"field": "x", "label": "L", "prompt": f"Why {SCRIPT}?", "kind": "text",
               "reason": f"bad {SCRIPT}", "unit": SCRIPT}
    run, pending = ask(operator, payload)
    client.force_login(operator)
    html = client.get(f"/runs/{run.id}/interrupts/").content.decode()
    assert SCRIPT not in html and "Why &lt;script&gt;" in html and "bad &lt;script&gt;" in html
    assert post(client, run, pending, f"<b>hi</b>{SCRIPT}").status_code == 200
    run = wait_run(run.id, statuses=FINAL)
    assert run.output == {"answer": f"<b>hi</b>{SCRIPT}"}  # stored as given
    for page in (f"/runs/{run.id}/interrupts/", "/inbox/"):
        html = client.get(page).content.decode()
        assert SCRIPT not in html and "<b>hi</b>" not in html
    assert "&lt;b&gt;hi&lt;/b&gt;" in client.get(f"/runs/{run.id}/interrupts/").content.decode()


def test_an_answer_over_the_service_limit_is_refused_inline(executor, operator, client):
    run, pending = ask(operator, {"field": "t", "prompt": "Text?", "kind": "text"})
    client.force_login(operator)
    response = post(client, run, pending, "x" * (services.MAX_ANSWER_BYTES + 1))
    assert response.status_code == 422
    assert f"at most {services.MAX_ANSWER_BYTES:,} characters" in response.content.decode() \
        or f"at most {services.MAX_ANSWER_BYTES} characters" in response.content.decode()
    assert_unchanged(run, pending)


@pytest.mark.parametrize("enforce_csrf", [False, True])
def test_a_one_megabyte_post_is_a_clear_error_not_a_500(executor, operator, enforce_csrf):
    run, pending = ask(operator, {"field": "t", "prompt": "Text?", "kind": "text"})
    client = Client(enforce_csrf_checks=enforce_csrf)
    client.force_login(operator)
    client.get("/inbox/")  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    response = client.post(f"/runs/{run.id}/interrupts/",
                           {f"i{pending.pk}-answer": "x" * 1_000_000, "submit": pending.pk},
                           headers={**HTMX, "X-CSRFToken": token})
    assert response.status_code in (400, 413)
    assert "larger than the 256 KB" in response.content.decode()
    assert_unchanged(run, pending)


def test_a_viewer_sees_a_disabled_form_and_may_not_answer(executor, operator, viewer, client):
    run, pending = ask(operator, {"field": "t", "prompt": "Text?", "kind": "text"})
    client.force_login(viewer)
    html = client.get(f"/runs/{run.id}/interrupts/").content.decode()
    assert "<fieldset disabled>" in html and "dashboard.answer_interrupt" in html
    response = post(client, run, pending, "sneaky")
    assert response.status_code == 403
    assert "answering needs the permission &#x27;dashboard.answer_interrupt&#x27;" in \
        response.content.decode()
    assert_unchanged(run, pending)
    plain = client.post(f"/runs/{run.id}/interrupts/",
                        {f"i{pending.pk}-answer": "sneaky", "submit": pending.pk})
    assert plain.status_code == 403 and "<h1>Questions of run" in plain.content.decode()


def test_json_answer_is_stored_as_parsed_json(executor, operator, client):
    run, pending = ask(operator, 42)
    client.force_login(operator)
    assert post(client, run, pending, json.dumps({"a": None})).status_code == 200
    pending.refresh_from_db()
    assert pending.answer == {"a": None}
