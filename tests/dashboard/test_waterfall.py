"""The waterfall: bars and the summary folded from events; model calls shown in the trace."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest

from dashboard.web.presentation.trace_calls import model_calls
from dashboard.web.presentation.waterfall import (
    BREAK_SHARE,
    Axis,
    shortened,
    summary,
    waterfall_view,
)
from planner.registry import get_graph
from tests.support.waterfall import T0, Log, acquisition_log, fold_of, stored_run

RUN = uuid.UUID(int=7)
SCRIPT = '<script>alert("x")</script>'


def test_each_node_execution_is_a_bar_with_its_model_calls_nested_under_it():
    fold = fold_of(acquisition_log())
    bars = [(s.kind, s.label, s.start, s.end) for s in fold.items]
    assert bars == [("engine", "decide", 0.0, 3.0), ("tool", "search", 3.0, 4.0),
                    ("engine", "ask_user", 4.0, 4.2),
                    ("human", "human wait (question)", 4.2, 14.2),
                    ("engine", "ask_user", 14.3, 14.5), ("engine", "finish", 14.5, 15.0)]
    (call,) = fold.items[0].children
    assert (call.kind, call.label, call.start, call.end) == ("model", "gpt-test", 0.5, 2.5)
    assert call.note == "120 in · 40 out"


def test_the_summary_splits_working_time_and_keeps_the_human_wait_apart():
    fold = fold_of(acquisition_log())
    s = summary(fold, now=fold.last)
    assert (s.total, s.human, s.working) == (15.0, 10.0, 5.0)
    parts = {p.name: (p.seconds, round(p.percent)) for p in s.parts}
    assert parts == {"model": (2.0, 40), "tools": (1.0, 20),
                     "the rest (engine, other nodes)": (2.0, 40)}
    assert s.model_calls == 1


def test_a_long_wait_for_a_human_is_drawn_shortened_and_work_to_scale(db):
    fold = fold_of(acquisition_log())
    axis = Axis.of(fold, end=fold.last)
    drawn = shortened(10.0, 5.0 * BREAK_SHARE)  # a little longer for a longer wait
    assert axis.breaks == ((4.2, 14.2, drawn),) and 5.0 * BREAK_SHARE < drawn < 1.0
    shown = 15 - 10 + drawn
    assert axis.percent(3.0) == pytest.approx(100 * 3 / shown)
    assert axis.percent(15.0) == 100.0 and axis.real(1.0) == pytest.approx(15.0)
    assert axis.percent(14.5) - axis.percent(14.2) == pytest.approx(100 * 0.3 / shown)
    assert axis.real(axis.percent(9.2) / 100) == pytest.approx(9.2)
    view = waterfall_view(fold, run_id=uuid.uuid4())
    assert view.shortened and view.ticks[-1] == (100.0, "15.0 s")


def test_a_call_shows_as_calling_until_its_end_arrives_then_fills_in(db):
    log = Log().add(0, "run_started").add(0, "node_started", "decide", "t1", step=1)
    log.call(0.5, None, "decide", "t1", "c1", model="gpt-slow")
    fold = fold_of(log)
    html = str(waterfall_view(fold, run_id=uuid.uuid4(), now=3.0).rows)
    assert "calling gpt-slow…" in html and "wf-open" in html
    fold.add(Log().call(0.5, 4.0, "decide", "t1", "c1", model="gpt-slow").events[1]
             | {"seq": 4})
    html = str(waterfall_view(fold, run_id=uuid.uuid4(), now=4.0).rows)
    assert "calling gpt-slow" not in html and "tokens not reported" in html
    assert fold.calls["c1"].end == 4.0


def test_parallel_calls_and_tool_time_inside_a_model_call_count_once():
    log = (Log().add(0, "run_started").add(0, "node_started", "search", "t1", step=1)
           .call(1, 3, "search", "t1", "a").call(2, 4, "search", "t1", "b")
           .add(5, "node_finished", "search", "t1", step=1, duration_ms=5000)
           .add(6, "run_succeeded"))
    parts = {p.name: p.seconds for p in summary(fold_of(log), now=6).parts}
    assert parts["model"] == 3.0 and parts["tools"] == 2.0  # 0-1 and 4-5


def test_a_late_written_start_is_moved_back_by_the_measured_duration():
    # both ends of a node written in one batch: the bar keeps the node's own duration
    log = Log().add(0, "run_started").node(2, 2, "decide", "t1", 1)
    log.events[-1]["duration_ms"] = 1500
    (bar,) = fold_of(log).items
    assert (bar.start, bar.end) == (0.5, 2.0)


def test_a_fan_out_is_one_folded_group_and_tasks_are_grouped_by_plan(db):
    spec = get_graph("decomposition")
    tasks = {"0": {"id": "0", "parent": None, "goal": "root", "status": "running"}}
    log = Log().add(0, "run_started")
    dispatch = {}
    for i in range(1, 41):
        tid = f"0.{i}"
        tasks[tid] = {"id": tid, "parent": "0", "goal": f"task {i}", "status": "ok"}
        dispatch[tid] = {**tasks[tid], "status": "running"}
    log.node(0, 1, "plan", "p", 1, update={"tasks": dispatch})
    for i in range(1, 41):
        log.node(1, 1 + i / 10, "work", f"w{i}", 2,
                 update={"tasks": {f"0.{i}": {"status": "ok"}}})
    fold = fold_of(log, task_view=spec.task_view)
    view = waterfall_view(fold, run_id=uuid.uuid4(), tasks=tasks)
    rows = str(view.rows)
    assert rows.count('class="wf-group"') == 1 and "work \u00d740" in rows
    assert '<details class="wf-group" id="wf-gn' in rows and " open>" not in rows  # folded
    task_rows = str(view.task_rows)
    assert task_rows.count('id="wf-t0.') == 40 and "plan of 0 root" in task_rows
    assert (fold.task_start["0.40"], fold.task_end["0.40"]) == (1.0, 5.0)
    assert view.bars == 1 + 40 + 40


def test_every_text_in_the_bars_is_escaped(db):
    log = Log().add(0, "run_started").node(0, 1, SCRIPT, "t1", 1)
    log.call(0.1, 0.9, SCRIPT, "t1", "c1", model=SCRIPT)
    html = str(waterfall_view(fold_of(log), run_id=uuid.uuid4()).rows)
    assert "<script>" not in html and "&lt;script&gt;alert(&quot;x&quot;)" in html


def test_tokens_show_as_not_reported_and_cost_as_unknown_when_absent():
    (call,) = model_calls(Log().call(0, 1, "decide", "t1", "c1").events)
    assert (call.tokens, call.cost, call.latency) == ("tokens not reported", "cost unknown",
                                                      "1.0 s")
    (paid,) = model_calls(Log().call(0, 1, "decide", "t1", "c2", usage={
        "input_tokens": 1200, "output_tokens": 30, "total_tokens": 1230, "cached_tokens": 0},
        cost={"input": 0.0012, "output": 0.0003, "total": 0.0015, "currency": "USD"}).events)
    assert (paid.tokens, paid.cost) == ("1,200 in · 30 out · 0 cached", "0.0015 USD")


# pages: rows stored as the model-call recorder writes them


@pytest.mark.django_db
def test_the_trace_page_draws_the_waterfall_and_its_summary(operator, client):
    run = stored_run(operator, acquisition_log())
    client.force_login(operator)
    html = client.get(f"/runs/{run.id}/").content.decode()
    box = html[html.index('id="trace-waterfall"'):html.index('id="waterfall-detail"')]
    assert re.search(r"Working time <b>5\.0 s</b>", box)
    assert re.search(r'id="wf-human">10\.0 s<', box)
    assert box.count('class="wf-bar wf-engine') == 4 and box.count("wf-bar wf-tool") == 1
    assert box.count("wf-bar wf-human") == 1 and box.count("wf-bar wf-model") == 1
    assert f'data-get="/runs/{run.id}/events/4/"' in box  # the call opens its end's row


@pytest.mark.django_db
def test_a_node_detail_lists_its_calls_and_a_call_opens_to_its_conversation(operator, client):
    long = "word " * 400
    log = (Log().add(0, "run_started").add(0, "node_started", "decide", "t1", step=1)
           .call(0.1, 0.9, "decide", "t1", "c1", answer=SCRIPT, messages=[
               {"role": "system", "content": long},
               {"role": "human", "content": '{"fields": ["price", "region"]}'}])
           .add(1, "node_finished", "decide", "t1", step=1, duration_ms=1000))
    run = stored_run(operator, log)
    client.force_login(operator)
    node = client.get(f"/runs/{run.id}/events/5/").content.decode()
    assert "Model calls" in node and "1 in this node" in node and "gpt-test" in node
    call = client.get(f"/runs/{run.id}/events/3/").content.decode()
    assert "<script>alert" not in call and "&lt;script&gt;alert(&quot;x&quot;)" in call
    assert '<details class="mc-fold"><summary>word word' in call  # a long text, folded
    assert '"fields": [\n    "price"' in call.replace("&quot;", '"')  # JSON, pretty
    assert "tokens not reported" in call and "cost unknown" in call
    assert 'class="mc-msg role-system"' in call and 'class="mc-msg role-ai"' in call


@pytest.mark.django_db
def test_a_call_without_its_end_says_it_is_calling(operator, client):
    log = (Log().add(0, "run_started").add(0, "node_started", "decide", "t1", step=1)
           .call(0.1, None, "decide", "t1", "c1", model="gpt-slow"))
    run = stored_run(operator, log)
    client.force_login(operator)
    call = client.get(f"/runs/{run.id}/events/3/").content.decode()
    assert "calling gpt-slow…" in call and "Answer" not in call


def test_the_human_wait_counts_ended_waits_once_and_grows_while_one_is_open():
    done = fold_of(acquisition_log()).figures.at(T0 + timedelta(seconds=99))
    assert (done.waiting, done.working, done.open_wait) == (10.0, 5.0, "")
    asking = (Log().add(0, "run_started").add(1, "interrupt_raised", payload={"interrupt_id": "a"})
              .add(4, "interrupt_answered", payload={"interrupt_id": "a"})
              .add(6, "interrupt_raised", payload={"interrupt_id": "b"})
              .add(7, "run_paused"))  # a pause inside the open wait adds nothing
    figures = fold_of(asking).figures
    assert figures.at(T0 + timedelta(seconds=16)).waiting == 13.0
    assert figures.at(T0 + timedelta(seconds=26)).waiting == 23.0  # it grows with the clock
    assert figures.at(T0 + timedelta(seconds=26)).open_wait == "question"


@pytest.mark.django_db
def test_the_trace_header_shows_working_time_and_the_wait_for_people_apart(operator, client):
    run = stored_run(operator, acquisition_log())  # 15 s: 5 s of work, 10 s for an answer
    client.force_login(operator)
    page = client.get(f"/runs/{run.id}/").content.decode()
    live = page[page.index('id="trace-live"'):page.index('id="trace-actions"')]
    assert re.search(r'<span class="muted">working</span> <span id="trace-working" '
                     r'class="nowrap">5\.0 s</span>', live)
    assert re.search(r'<span class="muted">waiting for people</span> <span id="trace-waiting" '
                     r'class="nowrap">10\.0 s</span>', live)
    assert "data-started" not in live and "15.0 s" not in live  # finished: nothing ticks
    # the full ids fold under "Ids"; the heading names the graph by its title
    head = page[page.index('id="trace-header"'):page.index('id="trace-live"')]
    assert str(run.id) not in head and run.thread_id not in head
    assert get_graph("acquisition").title in head
    ids = page[page.index('<details class="run-ids"'):]
    ids = ids[:ids.index("</details>")]
    assert str(run.id) in ids and run.thread_id in ids


def test_a_node_and_its_call_the_run_ended_under_are_drawn_stopped_not_running(db):
    """An operator cancels a run mid-call: the node's bar and its call's end where the run
    ended, marked stopped; neither says "running…" or "calling…" for ever."""
    log = Log().add(0, "run_started").add(0, "node_started", "decide", "t1", step=1)
    log.call(0.5, None, "decide", "t1", "c1", model="gpt-slow")
    log.add(2.0, "run_cancelled", payload={"reason": "cancelled", "by": "olga"})
    fold = fold_of(log)
    (node,) = fold.items
    (call,) = node.children
    assert (node.end, node.status, call.end, call.status) == (2.0, "stopped", 2.0, "stopped")
    html = str(waterfall_view(fold, run_id=uuid.uuid4(), now=60.0).rows)
    assert "wf-open" not in html and "calling gpt-slow" not in html and "wf-s-stopped" in html


def test_a_live_page_is_sent_only_the_rows_that_changed(db):
    # a fan-out of 40 workers, each with a model call, then 2 more workers: the second
    # batch sends those rows and the ones that moved, not the whole waterfall again
    log = Log().add(0, "run_started").node(0, 0.1, "plan", "p", 1)
    for i in range(40):
        log.add(0.2, "node_started", "work", f"w{i}", step=2)
        log.call(0.2, 0.25, "work", f"w{i}", f"c{i}", model="scripted")
        log.add(0.3, "node_finished", "work", f"w{i}", step=2, payload={"update": {}})
    fold = fold_of(log)
    first = waterfall_view(fold, run_id=RUN, now=0.35)
    assert first.delta(None) is None  # a page whose waterfall this socket never sent
    last = log.events[-1]
    for i in range(40, 42):
        fold.add({**last, "seq": last["seq"] + i, "kind": "node_started", "task_id": f"w{i}",
                  "payload": {}, "duration_ms": None})
    second = waterfall_view(fold, run_id=RUN, now=0.36)
    delta = str(second.delta(first.drawn))
    full = str(second.rows)
    assert delta and len(delta) < len(full) / 5
    assert 'hx-swap-oob="beforeend:#wf-gn' in delta  # the new workers join their group
    assert delta.count('class="wf-row wf-k-engine') == 3  # two new rows, the group's line
    assert "work \u00d742" in delta
    assert 'id="wf-m' not in delta  # the calls that did not change are not sent
    # the group folds the 40 identical calls into one line of its summary
    assert "scripted \u00d740" in str(first.rows)
    # once the run outgrows its axis, the page rescales its bars: the new length is sent
    # with the axis, and only the rows that changed
    later = waterfall_view(fold, run_id=RUN, now=30.0)
    assert later.scale != second.scale
    moved = str(later.delta(second.drawn))
    assert moved and len(moved) < len(str(later.rows)) / 5
