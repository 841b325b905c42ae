"""The run page's timeline: rows by node execution, its filters, replay by node, paused state."""

from __future__ import annotations

import re
import time

import pytest
from django.contrib.auth.models import Permission

from dashboard import services
from dashboard.models import Interrupt, Run, RunEvent
from tests.conftest import wait_run, wait_started


def row_ids(html: str) -> list[str]:
    return re.findall(r'<details class="grp [^"]*" id="grp-([\w-]+)"', html)


def row_titles(html: str) -> list[str]:
    return re.findall(r'<span class="grp-name[^"]*">([^<]*)</span>', html)


@pytest.fixture
def echo(executor, operator, client):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 2}, user=operator).id)
    client.force_login(operator)
    return run


def test_the_page_draws_one_row_per_node_run_with_bookkeeping_hidden(echo, client):
    html = client.get(f"/runs/{echo.id}/").content.decode()
    assert row_titles(html) == ["Run started", "Checkpoint", "Checkpoint", "step", "step",
                                "done", "Run succeeded"]
    assert 'class="timeline hide-bookkeeping"' in html
    assert html.count('class="grp kind-checkpoint bookkeeping"') == 2
    assert "n = 1 · trail = [&quot;step1&quot;]" in html  # what the first step changed
    shown = client.get(f"/runs/{echo.id}/", {"bookkeeping": "1"}).content.decode()
    assert 'class="timeline"' in shown, shown[shown.index('id="timeline-card"'):][:2000]
    assert re.search(r'<input type="checkbox" name="bookkeeping"[^>]* checked', shown)


def test_the_node_filter_keeps_that_nodes_runs_and_the_log_cursor(echo, client):
    html = client.get(f"/runs/{echo.id}/", {"node": "step"}).content.decode()
    assert row_titles(html) == ["step", "step"]
    assert 'data-node="step"' in html and '<option value="step" selected>' in html
    # the socket still resumes after the last event, not the last one shown
    assert f'data-last-seq="{echo.last_seq}"' in html


def test_the_kind_filter_shows_the_rows_with_such_an_event_bookkeeping_or_not(echo, client):
    finished = client.get(f"/runs/{echo.id}/", {"kind": "node_finished"}).content.decode()
    assert row_titles(finished) == ["step", "step", "done"]
    checkpoints = client.get(f"/runs/{echo.id}/", {"kind": "checkpoint"}).content.decode()
    assert "hide-bookkeeping" not in checkpoints
    assert row_titles(checkpoints) == ["Checkpoint", "Checkpoint", "step", "step", "done"]
    none = client.get(f"/runs/{echo.id}/", {"node": "done", "kind": "node_failed"})
    assert 'id="timeline-none"' in none.content.decode()


@pytest.mark.parametrize("query", [{"node": "nope"}, {"kind": "bogus"}, {"node": "\x7f%s"},
                                   {"bookkeeping": "maybe"}])
def test_a_bad_filter_is_named_and_the_page_still_shows(echo, client, query):
    response = client.get(f"/runs/{echo.id}/", query)
    html = response.content.decode()
    assert response.status_code == 200
    if "node" in query:
        assert "unknown node" in html and "this run&#x27;s nodes: step, ask, done" in html
    if "kind" in query:
        assert "unknown kind" in html and "node_finished" in html
    assert "step" in row_titles(html)  # the bad filter is dropped, the rows stay


def test_replay_steps_by_node_and_shows_the_state_and_answers_at_that_point(
        executor, operator, client):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 2, "ask": True},
                                       user=operator).id)
    services.interrupt_answer(interrupt=Interrupt.objects.get(run=run), answer="hello",
                              user=operator)
    run = wait_run(run.id, statuses=("succeeded", "failed"))
    client.force_login(operator)
    asked = run.events.get(kind=RunEvent.Kind.INTERRUPT_RAISED).seq
    answered = run.events.get(kind=RunEvent.Kind.INTERRUPT_ANSWERED).seq
    # from the first step's end, Next goes to the question, then to the end of its node run
    first_end = run.events.filter(kind=RunEvent.Kind.CHECKPOINT, step=1).get().seq
    html = client.get(f"/runs/{run.id}/", {"at": first_end}).content.decode()
    assert f'id="replay-next" href="?at={asked}"' in html
    assert 'id="replay-answers-none"' in html
    assert '&quot;trail&quot;: [\n    &quot;step1&quot;\n  ]' in html  # the state there
    at_question = client.get(f"/runs/{run.id}/", {"at": asked}).content.decode()
    ask_end = run.events.filter(kind=RunEvent.Kind.CHECKPOINT, step=2).get().seq
    assert f'id="replay-next" href="?at={ask_end}"' in at_question
    assert f'id="replay-next-event" href="?at={asked + 1}"' in at_question
    after = client.get(f"/runs/{run.id}/", {"at": answered}).content.decode()
    answers = after[after.index('id="replay-answers"'):after.index("</ol>")]
    assert "Say something" in answers and "hello" in answers and "olga" in answers
    # the filters stay on every replay link
    kept = client.get(f"/runs/{run.id}/", {"at": asked, "node": "step"}).content.decode()
    assert f'id="replay-next" href="?at={ask_end}&amp;node=step"' in kept


def test_a_paused_run_shows_its_state_in_the_debug_panel_with_a_way_to_edit_it(
        executor, operator, client):
    operator.user_permissions.add(*Permission.objects.filter(
        codename__in=["debug_run", "fork_run"]))
    run = services.run_create(graph="test.echo", input={"steps": 2}, user=operator,
                              options=services.RunOptions(interrupt_before=["done"]))
    run = wait_run(run.id, statuses=("paused",))
    client.force_login(operator)
    html = client.get(f"/runs/{run.id}/").content.decode()
    panel = html[html.index('id="run-paused"'):html.index('id="debug-breakpoints"')]
    assert 'id="paused-state-values"' in panel and "&quot;step2&quot;" in panel
    checkpoint = run.last_root_checkpoint()
    assert f'href="/runs/{run.id}/state/edit/" id="paused-edit-state"' in panel
    assert f'href="/runs/{run.id}/fork/?checkpoint={checkpoint}" id="paused-fork"' in panel


def paused_echo(operator, *, steps: int = 2, before: str = "done"):
    run = services.run_create(graph="test.echo", input={"steps": steps}, user=operator,
                              options=services.RunOptions(interrupt_before=[before]))
    return wait_run(run.id, statuses=("paused",))


EDIT = {"ch_n": "99", "ch_steps": "2", "ch_trail": '["step1", "step2"]', "ch_fail_at": "0",
        "ch_delay": "0.0", "ch_route_delay": "0.0", "ch_held_by": "", "as_node": ""}


def test_edit_and_continue_writes_the_paused_runs_state_then_runs_on_from_it(
        executor, operator, client):
    operator.user_permissions.add(*Permission.objects.filter(
        codename__in=["debug_run", "fork_run"]))
    run = paused_echo(operator)
    client.force_login(operator)
    form = client.get(f"/runs/{run.id}/state/edit/").content.decode()
    assert 'name="ch_n"' in form and 'id="state-edit-continue"' in form
    bad = client.post(f"/runs/{run.id}/state/edit/", {**EDIT, "ch_n": "lots", "continue": "1"})
    assert bad.status_code == 400 and "Enter a whole number." in bad.content.decode()
    assert wait_run(run.id, statuses=("paused",)).last_seq == run.last_seq  # nothing written
    done = client.post(f"/runs/{run.id}/state/edit/", {**EDIT, "continue": "1"})
    assert done.status_code == 302 and done["Location"] == f"/runs/{run.id}/"
    run = wait_run(run.id, statuses=("succeeded", "failed"))
    assert run.output == {"n": 99, "answer": None}
    edit = run.events.get(kind=RunEvent.Kind.CHECKPOINT, payload__source="update")
    assert edit.payload["by"] == "olga" and edit.payload["values"] == {"n": 99}
    page = client.get(f"/runs/{run.id}/").content.decode()  # in the timeline, never hidden
    assert f'<details class="grp kind-checkpoint" id="grp-e-{edit.seq}"' in page
    assert "State edited" in page and "by olga: n = 99" in page


def test_only_a_paused_run_is_edited_in_place_and_only_with_the_permission(
        executor, operator, client):
    run = paused_echo(operator)
    client.force_login(operator)
    assert client.post(f"/runs/{run.id}/state/edit/", {**EDIT, "continue": "0"}
                       ).status_code == 403
    services.run_continue(run=run, user=operator)
    run = wait_run(run.id, statuses=("succeeded", "failed"))
    refused = client.get(f"/runs/{run.id}/state/edit/")
    assert refused.status_code == 409 and "Re-run from here" in refused.content.decode()


def test_a_state_edit_sent_from_a_page_the_run_moved_past_is_refused_and_writes_nothing(
        executor, operator, client):
    """Decided on the checkpoint the page showed, as a run request's edit is: the run went
    on and paused again meanwhile (another tab continued it), so the edit would land on a
    state its sender never saw."""
    operator.user_permissions.add(*Permission.objects.filter(
        codename__in=["debug_run", "fork_run"]))
    run = paused_echo(operator, steps=3, before="step")
    client.force_login(operator)
    shown = run.last_root_checkpoint()
    form = client.get(f"/runs/{run.id}/state/edit/").content.decode()
    assert f'name="checkpoint" value="{shown}"' in form
    services.run_continue(run=run, user=operator)  # another tab: it runs on, pauses again
    wait_started(run)
    deadline = time.monotonic() + 30
    while (run := wait_run(run.id, statuses=("paused",))).last_root_checkpoint() == shown:
        assert time.monotonic() < deadline, "the run never paused again"
        time.sleep(0.05)
    before = run.last_seq
    sent = client.post(f"/runs/{run.id}/state/edit/",
                       {**EDIT, "checkpoint": shown, "continue": "0"}, follow=True)
    assert "moved on since its state was shown" in sent.content.decode()
    run.refresh_from_db()
    assert run.last_seq == before and run.status == Run.Status.PAUSED
    assert not run.events.filter(kind=RunEvent.Kind.CHECKPOINT,
                                 payload__source="update").exists()
