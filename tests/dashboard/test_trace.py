"""The trace view: the log folded into the picture, DAG and decisions; pages built on it."""

from __future__ import annotations

import json
import re

import pytest

from dashboard import services
from dashboard.checkpoints import checkpoint_get
from dashboard.models import Run, RunEvent
from dashboard.web.presentation import results, trace
from tests.conftest import assert_gapless, wait_run


def rows(html: str) -> list[int]:
    return [int(s) for s in re.findall(r'id="ev-(\d+)" data-seq="\1"', html)]


def test_the_fold_counts_visits_and_edges_taken_of_an_echo_run(executor, operator):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 3}, user=operator).id)
    fold, events = trace.trace_fold(run=run)
    assert [e["seq"] for e in events] == [e.seq for e in assert_gapless(run)]
    assert fold.visits == {"step": 3, "done": 1}
    assert fold.taken == {("__start__", "step"), ("step", "step"), ("step", "done"),
                          ("done", "__end__")}
    assert fold.current == "" and fold.phase == "succeeded" and fold.last_seq == run.last_seq


def test_the_trace_page_shows_one_row_per_event_and_the_marks(executor, operator, client):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 2}, user=operator).id)
    client.force_login(operator)
    html = client.get(f"/runs/{run.id}/").content.decode()
    assert rows(html) == list(range(1, run.last_seq + 1))
    state = json.loads(re.search(r'data-state="([^"]*)"', html).group(1).replace("&quot;", '"'))
    assert state["visits"] == {"step": 2, "done": 1}
    assert f'ws-connect="/ws/runs/{run.id}/?after={run.last_seq}"' in html
    assert 'id="trace-replay-link"' in html and "Succeeded" in html


def test_anonymous_users_are_sent_to_the_login_page(executor, operator, client):
    run = services.run_create(graph="test.echo", input={"steps": 1}, user=operator)
    response = client.get(f"/runs/{run.id}/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_replay_shows_the_log_up_to_the_chosen_event(executor, operator, client):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 3}, user=operator).id)
    client.force_login(operator)
    html = client.get(f"/runs/{run.id}/?at=4").content.decode()
    assert rows(html) == [1, 2, 3, 4]
    # Next goes to the end of the node run (its checkpoint, #6); by event, to #5
    assert 'id="replay-next" href="?at=6"' in html and f"/ws/runs/{run.id}/" not in html
    assert 'id="replay-next-event" href="?at=5"' in html
    assert 'id="ev-4" data-seq="4" aria-current="step"' in html  # the chosen event, marked
    assert client.get("/runs/00000000-0000-0000-0000-000000000000/").status_code == 404


# a NUL never reaches the view: the guard refuses it first (tests/security/test_guard.py)
@pytest.mark.parametrize("at", ["", "0", "four", "-1", "1.5", "999", "²"])
def test_a_bad_replay_position_gets_one_message_naming_the_range(executor, operator, client,
                                                                   at):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 1}, user=operator).id)
    client.force_login(operator)
    bad = client.get(f"/runs/{run.id}/", {"at": at})
    text = bad.content.decode()
    assert bad.status_code == 400
    assert text.count(f"from 1 to {run.last_seq}") == 1 and "registered" not in text


def test_replay_shows_the_header_as_it_stood_at_the_chosen_event(executor, operator, client):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 3}, user=operator).id)
    client.force_login(operator)
    events = list(run.events.order_by("seq"))
    started = next(e for e in events if e.kind == "node_started")
    html = client.get(f"/runs/{run.id}/?at={started.seq}").content.decode()
    assert ">Running<" in html and ">Succeeded<" not in html
    assert f'id="trace-current" class="mono">{started.node}<' in html
    elapsed = (started.at - events[0].at).total_seconds()  # when things happened
    assert f">{elapsed:.1f} s<" in html
    last = client.get(f"/runs/{run.id}/?at={run.last_seq}").content.decode()
    assert ">Succeeded<" in last and 'id="trace-result"' in last


def test_a_timeline_row_expands_to_its_update_and_checkpoint_diff(executor, operator, client):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 2}, user=operator).id)
    client.force_login(operator)
    first = run.events.filter(kind=RunEvent.Kind.NODE_FINISHED).first()
    html = client.get(f"/runs/{run.id}/events/{first.seq}/").content.decode()
    assert "step1" in html and "Diff against the previous checkpoint" in html
    assert re.search(r'<td class="mono">n</td><td>(added|changed)</td>', html)
    assert client.get(f"/runs/{run.id}/events/999/").status_code == 404


def test_the_state_inspector_shows_the_state_at_a_checkpoint(executor, operator, client):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 2}, user=operator).id)
    client.force_login(operator)
    last = run.events.filter(kind=RunEvent.Kind.CHECKPOINT).last()
    html = client.get(f"/runs/{run.id}/state/?checkpoint={last.checkpoint_id}").content.decode()
    stored = checkpoint_get(thread_id=run.thread_id, checkpoint_id=last.checkpoint_id)
    assert "&quot;trail&quot;" in html and stored.values["trail"] == ["step1", "step2", "done"]
    assert client.get(f"/runs/{run.id}/state/").status_code == 400
    assert client.get(f"/runs/{run.id}/state/?checkpoint=nope").status_code == 404


def test_only_operators_with_the_permission_may_cancel(executor, operator, viewer, client):
    run = services.run_create(graph="test.echo", input={"steps": 200, "delay": 0.05},
                              user=operator)
    client.force_login(viewer)
    assert client.post(f"/runs/{run.id}/cancel/").status_code == 403
    client.force_login(operator)
    assert client.post(f"/runs/{run.id}/cancel/").status_code == 302
    assert wait_run(run.id).status == Run.Status.CANCELLED
    again = client.post(f"/runs/{run.id}/cancel/", follow=True).content.decode()
    assert "already cancelled" in again


def test_starting_a_run_from_the_form(executor, operator, viewer, client):
    client.force_login(operator)
    page = client.get("/runs/new/?graph=test.echo").content.decode()
    assert 'name="steps"' in page and "Echo (tests)" in page
    bad = client.post("/runs/new/", {"graph": "test.echo", "steps": "lots"})
    assert bad.status_code == 400 and 'id="error-steps"' in bad.content.decode()
    out_of_range = client.post("/runs/new/", {"graph": "test.echo", "steps": "5000"})
    assert "out of range" in out_of_range.content.decode()
    unknown = client.post("/runs/new/", {"graph": "nope"})
    assert unknown.status_code == 400 and "registered graphs" in unknown.content.decode()
    assert not Run.objects.exists()
    ok = client.post("/runs/new/", {"graph": "test.echo", "steps": "2"})
    run = Run.objects.get()
    assert ok.status_code == 302 and ok["Location"] == f"/runs/{run.id}/"
    assert run.input["steps"] == 2 and run.created_by == operator
    client.force_login(viewer)
    assert client.post("/runs/new/", {"graph": "test.echo", "steps": "2"}).status_code == 403


def test_the_task_dag_folded_from_the_log_equals_the_checkpointed_tasks(
        executor, operator, client):
    run = wait_run(services.run_create(graph="decomposition", input={"breadth": 3},
                                       user=operator).id)
    assert run.status == Run.Status.SUCCEEDED
    fold, _ = trace.trace_fold(run=run)
    stored = checkpoint_get(thread_id=run.thread_id).values["tasks"]
    assert fold.tasks == stored
    client.force_login(operator)
    html = client.get(f"/runs/{run.id}/").content.decode()
    cards = dict(re.findall(r'id="task-([\w-]+)" class="task status-(\w+)"', html))
    children = {trace.dom_id(t): r["status"] for t, r in stored.items() if r.get("parent")}
    assert cards == children and set(cards.values()) == {"ok"}


def test_why_this_way_lists_every_decision_of_an_acquisition_run(executor, operator, client):
    run = services.run_create(graph="acquisition",
                              input={"region": "Germany", "currency": "EUR"}, user=operator)
    run = wait_run(run.id)
    decisions = checkpoint_get(thread_id=run.thread_id).values["decisions"]
    assert decisions
    client.force_login(operator)
    html = client.get(f"/runs/{run.id}/").content.decode()
    assert len(re.findall(r'<tr class="decision"', html)) == len(decisions)
    assert f'origin-{decisions[0]["origin"]}' in html


def test_the_runs_list_links_to_traces_and_listens_for_new_runs(executor, operator, client):
    run = services.run_create(graph="test.echo", input={"steps": 1}, user=operator)
    client.force_login(operator)
    html = client.get("/").content.decode()
    assert f'href="/runs/{run.id}/"' in html and 'id="run-rows-body"' in html
    assert 'ws-connect="/ws/runs/?since=' in html and 'href="/runs/new/"' in html
    filtered = client.get("/?graph=test.echo").content.decode()
    assert 'id="run-rows-body"' not in filtered  # new runs may not match the filter


def test_a_failed_node_row_expands_to_its_error_and_traceback(executor, operator, client):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 3, "fail_at": 2},
                                       user=operator).id)
    failed = run.events.get(kind=RunEvent.Kind.NODE_FAILED)
    client.force_login(operator)
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert "RuntimeError: step 2 failed on purpose" in page  # on the row and in the header
    html = client.get(f"/runs/{run.id}/events/{failed.seq}/").content.decode()
    assert '<pre class="tb">Traceback' in html and "failed on purpose" in html


def test_subgraph_nodes_are_drawn_nested_under_their_parent():
    text = trace._mermaid(
        ("__start__", "plan", "worker:fetch", "worker:parse", "__end__"),
        (("__start__", "plan", False), ("plan", "worker:fetch", True),
         ("worker:fetch", "worker:parse", False), ("worker:parse", "__end__", False)),
    )
    block = text[text.index('subgraph sg_worker["worker"]'):text.index("  end")]
    assert 'n_worker_fetch["fetch"]' in block and 'n_worker_parse["parse"]' in block
    assert "n_plan -.-> n_worker_fetch" in text


def test_a_failed_run_shows_its_error_first_with_the_traceback_on_demand(
        executor, operator, client):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 3, "fail_at": 2},
                                       user=operator).id)
    assert run.status == Run.Status.FAILED
    client.force_login(operator)
    html = client.get(f"/runs/{run.id}/").content.decode()
    card = html[html.index('id="trace-result"'):html.index("</section>",
                                                            html.index('id="trace-result"'))]
    assert "result-failed" in html and "step 2 failed on purpose" in card
    assert '<details class="result-traceback"><summary>Traceback</summary>' in card
    assert "RuntimeError" in card


def test_a_cancelled_run_says_who_cancelled_it_and_where_it_stood(executor, operator, client):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 3, "ask": True},
                                       user=operator).id)
    assert run.status == Run.Status.INTERRUPTED
    services.run_cancel(run=run, user=operator)
    run.refresh_from_db()
    client.force_login(operator)
    html = client.get(f"/runs/{run.id}/").content.decode()
    assert "by olga" in html and f"event {run.last_seq} of {run.last_seq}" in html
    assert f'<b class="mono">{run.current_node}</b>' in html


def test_every_task_opens_its_details(executor, operator, client):
    run = wait_run(services.run_create(graph="decomposition", input={"breadth": 3},
                                       user=operator).id)
    fold, _ = trace.trace_fold(run=run)
    tid, task = next((t, r) for t, r in fold.tasks.items() if r.get("deps"))
    client.force_login(operator)
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert f'data-get="/runs/{run.id}/tasks/{tid}/"' in page
    html = client.get(f"/runs/{run.id}/tasks/{tid}/").content.decode()
    assert task["goal"] in html and ">Worker<" in html and ">Attempts<" in html
    assert all(f">{dep}</button>" in html for dep in task["deps"])
    assert client.get(f"/runs/{run.id}/tasks/nope/").status_code == 404


def test_the_goal_is_on_the_trace_the_runs_list_and_every_inbox_row(executor, operator,
                                                                     client):
    goals = ["Size the Dutch market for bike leasing", "Size the Irish market for " + "x" * 120]
    runs = [services.run_create(graph="acquisition", input={"goal": g}, user=operator)
            for g in goals]
    for run in runs:
        wait_run(run.id)
    client.force_login(operator)
    listing = client.get("/").content.decode()
    inbox = client.get("/inbox/").content.decode()
    assert goals[0] in listing and goals[0] in inbox
    assert "Size the Irish market for xxx" in listing  # shortened, whole in the title
    trace_page = client.get(f"/runs/{runs[1].id}/").content.decode()
    assert f'<p class="goal-full">{goals[1]}</p>' in trace_page  # the whole goal on demand


def test_tasks_show_waiting_while_the_run_waits_and_cancelled_once_it_is_cancelled(
        executor, operator):
    run = services.run_create(graph="decomposition", input={"ask_clarifications": True},
                              user=operator)
    run = wait_run(run.id)
    assert run.status == Run.Status.INTERRUPTED
    fold, _ = trace.trace_fold(run=run)
    shown = {tid: trace.task_card(fold, tid)["status"] for tid in fold.tasks}
    recorded = {tid: task["status"] for tid, task in fold.tasks.items()}
    asking = [tid for tid, status in recorded.items() if status == "running"]
    assert asking and all(shown[tid] == "waiting" for tid in asking)
    assert "running" not in shown.values()

    services.run_cancel(run=run, user=operator)
    run = wait_run(run.id, statuses=("cancelled",))
    fold, _ = trace.trace_fold(run=run)
    shown = {tid: trace.task_card(fold, tid)["status"] for tid in fold.tasks}
    assert not {"running", "pending", "waiting"} & set(shown.values())
    assert "cancelled" in shown.values()
    # what the graph recorded stays visible beside what the run made of it
    assert {trace.task_card(fold, tid)["recorded_status"] for tid in fold.tasks} >= {"running"}
    # the waterfall says so too: the bars of tasks in flight end with the run, stopped
    rows = str(trace.panels_context(run=run, fold=fold)["waterfall"]().task_rows)
    assert "wf-open" not in rows and "running\u2026" not in rows and "waiting" not in rows
    assert "wf-s-stopped" in rows and '<span class="wf-note">cancelled</span>' in rows
    # and the counts of the result card
    counts = dict(results.run_result(run=run, tasks=fold.tasks)["tasks"])
    assert counts.get("cancelled") and not {"running", "pending"} & set(counts)


def test_a_paused_run_marks_the_node_it_waits_to_run_as_the_header_does(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 2}, user=operator,
                              options=services.RunOptions(interrupt_before=["done"]))
    run = wait_run(run.id, statuses=("paused", "succeeded", "failed"))
    assert run.status == Run.Status.PAUSED and run.current_node == "done"
    fold, _ = trace.trace_fold(run=run)
    # the last node started was "step"; the run stands before "done"
    assert fold.current == "done" and fold.phase == "paused"
    assert trace.graph_state(fold)["current"] == trace.dom_id("done")
