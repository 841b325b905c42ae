"""An operator's session in real Chromium, on a desktop (1400 px) and on a phone (390 px).

Both graphs are started from the new-run form, every question is answered with the
keyboard alone, a decomposition is cancelled mid-round, a finished run is replayed at
several events; every page is checked for console errors, failed requests (the page
fixture) and for a layout wider than the screen. Screenshots land in tests/artifacts/.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from dashboard.models import Run
from dashboard.web.presentation import header, trace
from tests.browser.conftest import (
    DESKTOP,
    PHONE,
    no_overflow,
)
from tests.conftest import login, wait_run
from tests.support.browser import TYPED, header_says, shot, size_name, start_from_form

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SIZES = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]
FOCUSED_QUESTION = ("() => { const a = document.activeElement;"
                    " return !!(a && a.closest && a.closest('.question')"
                    " && a.matches('input, textarea, select')); }")


SCROLL_AWAY = ("() => { const b = document.getElementById('trace-timeline'); b.scrollTop = 0;"
               " window.pwAway = [b.scrollHeight, b.clientHeight, b.scrollTop]; }")


def answer_by_keyboard(page, before_send: str = "") -> int:
    """Answer every question the run asks on its trace page, with keys only, until it ends.

    The page puts the focus in the first question; after each answer it moves it to the
    next question (or the status line) by itself: no click, no ``focus()`` from here.
    """
    answered = 0
    while True:
        page.wait_for_function(f"() => ({FOCUSED_QUESTION})() || {FINISHED_JS}",
                               timeout=30_000)
        if not page.evaluate(FOCUSED_QUESTION):
            return answered
        answered += answer_by_keyboard_once(page, before_send)


FOCUSED_PK = "() => document.activeElement.closest('.question').dataset.pk"
INTERRUPTS = re.compile(r"/runs/[0-9a-f-]+/interrupts/$")


def answer_held_until_asked_again(page) -> int:
    """Answer the first question with the keyboard, its reply held back until the run has
    asked its next question (a loaded server's reply can come back after the live update):
    the late reply leaves the next question where it is, the keyboard in it."""
    held: list = []

    def hold(route) -> None:
        if route.request.method == "POST" and not held:
            held.append((route, route.fetch()))  # sent, its reply kept
        else:
            route.continue_()

    page.route(INTERRUPTS, hold)
    # counted on the answer's form itself: replaced by then, it is out of the document and
    # htmx's afterRequest on it reaches no listener of the document
    page.evaluate("() => { window.pwReplies = 0; document.addEventListener("
                  "'htmx:beforeRequest', e => { if (e.detail.requestConfig.verb === 'post')"
                  " e.detail.elt.addEventListener('htmx:afterRequest',"
                  " () => window.pwReplies++, {once: true}); }); }")
    first = page.evaluate(FOCUSED_PK)
    answered = answer_by_keyboard_once(page)
    page.wait_for_function(f"() => ({FOCUSED_QUESTION})() && ({FOCUSED_PK})() !== {first!r}",
                           timeout=30_000)
    second = page.evaluate(FOCUSED_PK)
    [(route, reply)] = held
    route.fulfill(response=reply)
    page.wait_for_function("() => window.pwReplies > 0")
    page.unroute(INTERRUPTS, hold)
    assert page.evaluate(FOCUSED_QUESTION) and page.evaluate(FOCUSED_PK) == second, (
        "the first answer's late reply took the next question away")
    return answered


# What the questions' section went through, kept by the page for a failure's message: every
# swap into it (what asked for it, the render's version, its open questions, whether its
# Answer button could be reached) and every focus that left a question's field.
SWAP_LOG = """(() => {
  window.pwSwaps = [];
  const put = (what) => { window.pwSwaps.push(Math.round(performance.now()) + ' ' + what);
                          if (window.pwSwaps.length > 40) window.pwSwaps.shift(); };
  const state = () => { const s = document.getElementById('run-interrupts');
    const box = s && s.querySelector('.interrupts');
    const primary = s && s.querySelector('.q-actions .primary');
    return box ? 'v' + box.dataset.version + ' open ' + [...box.querySelectorAll(
      '.question.pending')].map(q => q.dataset.pk).join(',') + ' primary ' + (primary
      ? (primary.disabled || primary.closest('fieldset:disabled') ? 'disabled' : 'ok')
      : 'none') : 'no box'; };
  document.addEventListener('htmx:beforeSwap', e => put('beforeSwap '
    + ((e.detail.requestConfig || {}).verb || '?') + ' ' + e.detail.xhr.status + ' swap='
    + e.detail.shouldSwap + ' coming ' + ((/data-version="([^"]*)"/.exec(
      e.detail.serverResponse || '') || [])[1] || '-') + ' shown ' + state()));
  document.addEventListener('htmx:afterSettle', e => put('afterSettle ' + state()));
  document.addEventListener('focusout', e => { if (e.target.closest && e.target.closest(
    '.question')) put('focusout ' + (e.target.id || e.target.tagName) + ' to '
    + (e.relatedTarget ? e.relatedTarget.tagName + '#' + e.relatedTarget.id : 'nothing')
    + (e.target.isConnected ? '' : ' (detached)')); });
})()"""


# the box fetched and swapped in; pwSettled counts its settles (not the timeline's)
REDRAW = ("() => { window.pwSettled = 0; document.addEventListener('htmx:afterSettle',"
          " e => { if (e.detail.target.id === 'run-interrupts') window.pwSettled++; });"
          " htmx.ajax('GET', location.pathname + 'interrupts/',"
          " {target: '#run-interrupts', swap: 'innerHTML'}); }")


def keeps_its_place_through_a_live_update(page) -> None:
    """The keyboard on the Answer button, or on the question's Details, when the run's
    questions are drawn again (what a doorbell does: the box fetched and swapped in) stays
    there; the keys go on from it. (It fell to the page's body: the next Tab started from
    the top.)"""
    for key, there, back in (
            ("Tab", "#run-interrupts .q-actions .primary", "Shift+Tab"),
            ("Shift+Tab", "#run-interrupts .question.pending .q-ids summary", "Tab")):
        page.keyboard.press(key)
        expect(page.locator(there)).to_be_focused()
        page.evaluate(REDRAW)
        page.wait_for_function("() => window.pwSettled > 0")
        expect(page.locator(there)).to_be_focused()
        page.keyboard.press(back)
        page.wait_for_function(FOCUSED_QUESTION)


FINISHED_JS = ("['Succeeded', 'Failed', 'Cancelled'].includes("
               "document.getElementById('trace-status').textContent.trim())")


@pytest.mark.parametrize("page", SIZES, indirect=True)
def test_an_acquisition_run_from_form_to_result_and_replay(live_server_url, page, operator):
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.add_init_script(SWAP_LOG)
    no_overflow(page)
    # a runs list filtered so the new run is not on it: its pushes must not be errors there
    hidden = page.context.new_page()
    page.watch.attach(hidden)
    hidden.goto(f"{live_server_url}/?status=failed")
    listed = page.context.new_page()  # and one that shows it arrive and move
    page.watch.attach(listed)
    listed.goto(f"{live_server_url}/")
    run = start_from_form(page, live_server_url, "acquisition", {"max_iters": "8"})
    expect(listed.locator(f"#run-{run.id} .row-goal")).to_contain_text("addressable market")
    # the goal is on the header from the first render
    expect(page.locator("#trace-goal")).to_contain_text("budgeting app")
    page.wait_for_function(FOCUSED_QUESTION, timeout=30_000)
    # waiting for the operator: the header says so, with the node, never "Running · —"
    header_says(page, "Waiting for you")
    expect(page.locator("#trace-current")).to_have_text("ask_user")
    no_overflow(page)
    shot(page, "acquisition-question")
    answered = answer_held_until_asked_again(page)
    keeps_its_place_through_a_live_update(page)
    answered += answer_by_keyboard(page, before_send=SCROLL_AWAY)
    header_says(page, "Succeeded")
    # the live timeline follows new rows; scrolled away (before the last answer went out),
    # it counts the rows that came below in a pill instead, which brings the reader back
    pill = page.locator("#timeline-new")
    away = page.evaluate("window.pwAway")
    assert away[0] - away[1] > 100, f"the timeline could not be scrolled away from: {away}"
    expect(pill).to_have_text(re.compile(r"^[1-9]\d* new events? ↓$"))
    pill.click()
    expect(pill).to_be_hidden()
    assert page.locator("#trace-timeline").evaluate(
        "b => b.scrollHeight - b.scrollTop - b.clientHeight < 40")
    run = wait_run(run.id)
    assert run.status == Run.Status.SUCCEEDED, run.error_message
    asked = list(run.interrupts.values_list("status", "answered_by__username"))
    assert answered >= 2 and asked == [("answered", "olga")] * answered, (answered, asked)
    result = page.locator("#trace-result")
    expect(result).to_be_visible()
    expect(result).not_to_have_attribute("hidden", "")
    expect(result.locator(".result-formula")).to_contain_text(
        "TAM = population \u00d7 adoption rate \u00d7 yearly price = ")
    expect(result.locator(".result-item", has_text="Population")).to_contain_text(
        "population 2024 (local-corpus://")
    no_overflow(page)
    if size_name(page) == "desktop":  # "Why this way" fits its card, beside the inspector
        assert page.evaluate("() => { const c = document.getElementById('trace-why'),"
                             " i = document.getElementById('trace-inspector');"
                             " return c.scrollWidth <= c.clientWidth"
                             " && c.getBoundingClientRect().right"
                             " <= i.getBoundingClientRect().left; }")
    shot(page, "acquisition-result")

    # replay: the header as it stood at the chosen event, the event marked and in view
    events = trace.trace_fold(run=run)[1]
    asked = next(e["seq"] for e in events if e["kind"] == "interrupt_raised")
    for at in (1, asked, run.last_seq // 2, run.last_seq):
        page.goto(f"{live_server_url}/runs/{run.id}/?at={at}")
        fold, shown = trace.trace_fold(run=run, upto=at)
        head = header.replay_head(shown, current=fold.current, run=run)
        expect(page.locator("#trace-status")).to_have_text(head.status_label)
        expect(page.locator("#trace-current")).to_have_text(head.node or "—")
        expect(page.locator("#trace-duration")).to_have_text(head.duration)
        marked = page.locator(f"#ev-{at}")
        expect(marked).to_have_class(re.compile(r"\bis-at\b"))
        assert page.evaluate(
            "([row, box]) => { const r = row.getBoundingClientRect(),"
            " b = box.getBoundingClientRect(); return r.top >= b.top - 1"
            " && r.bottom <= b.bottom + 1; }",
            [marked.element_handle(), page.locator("#trace-timeline").element_handle()],
        ), f"event {at} is not scrolled into view"
        no_overflow(page)
    shot(page, "acquisition-replay-last")
    page.goto(f"{live_server_url}/runs/{run.id}/?at={asked}")
    shot(page, "acquisition-replay-question")
    page.keyboard.press("Shift+ArrowRight")  # by event (plain arrows step by node run)
    expect(page.locator("#replay-at")).to_have_text(str(asked + 1))
    expect(page).to_have_url(re.compile(rf"\?at={asked + 1}$"))
    page.keyboard.press("Shift+ArrowLeft")
    expect(page.locator("#replay-at")).to_have_text(str(asked))
    for bad in ("", "0", str(run.last_seq + 1), "ten"):
        page.expect_status(400)
        page.goto(f"{live_server_url}/runs/{run.id}/?at={bad}")
        expect(page.locator("#bad-at .error")).to_have_text(re.compile(
            rf"from 1 to {run.last_seq}\."))
        no_overflow(page)
    shot(page, "replay-bad-position")

    expect(listed.locator(f"#run-{run.id}-status")).to_contain_text("Succeeded")
    expect(hidden.locator(f"#run-{run.id}")).to_have_count(0)
    hidden.close()
    listed.close()
    # the runs list and the inbox show the goal on every row
    page.goto(f"{live_server_url}/")
    expect(page.locator(f"#run-{run.id} .row-goal")).to_contain_text("addressable market")
    no_overflow(page)
    shot(page, "runs-list")


@pytest.mark.parametrize("page", SIZES[:1], indirect=True)  # keys: a desktop's
def test_a_decomposition_answered_by_keyboard_then_cancelled_mid_round(
        live_server_url, page, operator):
    login(page, live_server_url, "olga", "pw-olga-1234")
    run = start_from_form(page, live_server_url, "decomposition",
                          {"breadth": "16", "ask_clarifications": "on"})
    page.wait_for_function(FOCUSED_QUESTION, timeout=30_000)
    # the inbox names the goal of the run each question belongs to
    inbox = page.context.new_page()
    inbox.goto(f"{live_server_url}/inbox/")
    expect(inbox.locator("#inbox-table .row-goal").first).to_be_visible()
    no_overflow(inbox)
    shot(inbox, "inbox")
    inbox.close()
    shot(page, "decomposition-questions")
    # one question answered by keys ("Answer this one"); the round stays open on the other
    page.keyboard.type("the town council")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.textContent.trim()") == "Answer this one"
    page.keyboard.press("Enter")
    # the reply moves the focus on to the question still open
    page.wait_for_function(FOCUSED_QUESTION, timeout=15_000)
    header_says(page, "Waiting for you")  # paused again, mid-round, on the other question
    expect(page.locator("#run-interrupts .question")).to_have_count(1)
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#trace-cancel").click()
    header_says(page, "Cancelled")
    # waiting for an answer, nobody executed it: cancelled at once, and never said to be
    # stopping "at its next node" (the notice says so, or the socket emptied it)
    expect(page.locator("#trace-notice")).not_to_contain_text("next node")
    run = wait_run(run.id)
    assert run.status == Run.Status.CANCELLED
    result = page.locator("#trace-result")
    expect(result).to_contain_text("Cancelled")
    expect(result).to_contain_text(f"of {run.last_seq}")
    # the DAG shows what the log folds to, card for card
    fold, _ = trace.trace_fold(run=run)
    shown = dict(page.locator("#trace-dag .task").evaluate_all(
        "ts => ts.map(t => [t.dataset.tid, t.dataset.status])"))
    folded = {tid: trace.task_card(fold, tid)["status"] for tid, t in fold.tasks.items()
              if t.get("parent") is not None}
    assert shown == folded
    # and what it folds to is true of a stopped run: nothing running, nothing waiting to
    stale = sorted(tid for tid, status in folded.items() if status in ("running", "pending"))
    assert not stale, f"a cancelled run shows tasks still in flight: {stale[:10]}"
    assert "cancelled" in folded.values()

    # every task opens its details; the keyboard reaches them
    task = page.locator("#trace-dag .task").nth(3)
    task.focus()
    page.keyboard.press("Enter")
    detail = page.locator("#task-detail")
    expect(detail).to_contain_text(task.get_attribute("data-tid"))
    expect(detail).to_contain_text("Worker")
    expect(page.locator("#trace-dag svg.dag-edges path.edge").first).to_be_attached()
    no_overflow(page)
    shot(page, "decomposition-cancelled")


def answer_by_keyboard_once(page, before_send: str = "") -> int:
    """Answer the open questions of the page with keys only (one form, one Enter)."""
    typed = 0
    walked = []
    for _ in range(14):
        tag = page.evaluate("() => document.activeElement.tagName")
        walked.append(page.evaluate(
            "() => { const e = document.activeElement; return e.tagName + "
            "(e.id ? '#' + e.id : '') + (e.name ? '[' + e.name + ']' : '') + "
            "' ' + (e.textContent || '').trim().slice(0, 30); }"))
        if tag == "SELECT":
            page.keyboard.press("ArrowDown")
            typed += 1
        elif tag in ("INPUT", "TEXTAREA"):
            field = page.evaluate("() => document.activeElement.closest('.question')"
                                  "?.dataset.field || ''")
            page.keyboard.press("ControlOrMeta+A")  # a value the goal preselected is replaced
            page.keyboard.type(TYPED.get(field, "plain and brief"))
            typed += 1
        elif tag == "BUTTON" and page.evaluate(
                "() => document.activeElement.classList.contains('primary')"):
            if before_send:
                page.evaluate(before_send)
            page.keyboard.press("Enter")
            # the reply moves the focus on: the next question, or the status line
            page.wait_for_function("() => document.activeElement !== document.body"
                                   " && !!document.activeElement.closest('#run-interrupts')",
                                   timeout=15_000)
            return typed
        page.keyboard.press("Tab")
    swaps = page.evaluate("() => (window.pwSwaps || []).join('\\n')")
    raise AssertionError(f"the answer button could not be reached with Tab: {walked}\n"
                         f"the questions' section meanwhile:\n{swaps}")


@pytest.mark.parametrize("page", SIZES, indirect=True)
def test_every_page_fits_the_screen_and_errors_have_navigation(live_server_url, page,
                                                               operator):
    page.goto(f"{live_server_url}/accounts/login/")
    no_overflow(page)
    shot(page, "login")
    login(page, live_server_url, "olga", "pw-olga-1234")
    for path in ("/", "/inbox/", "/runs/new/", "/runs/new/?graph=decomposition"):
        page.goto(f"{live_server_url}{path}")
        no_overflow(page)
    page.expect_status(404)
    page.goto(f"{live_server_url}/runs/00000000-0000-0000-0000-000000000000/")
    expect(page.locator("#error-page h1")).to_contain_text("Not found")
    expect(page.locator("#error-page a", has_text="runs list")).to_be_visible()
    no_overflow(page)
    shot(page, "not-found")
    assert page.request.get(f"{live_server_url}/favicon.ico").ok


def test_redoc_works_offline(live_server_url, page, operator):
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.goto(f"{live_server_url}/api/redoc/")
    expect(page.locator("#redoc-container h1").first).to_contain_text("Planwatch API",
                                                                      timeout=20_000)
    assert not page.watch.foreign  # no font, no script from another host
