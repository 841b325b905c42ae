"""The timeline's grouping: one row per node execution, folded from events as they come."""

from __future__ import annotations

from typing import Any

from dashboard.web.presentation.timeline import (
    Timeline,
    answers_upto,
    replay_stops,
    rows_filter,
    timeline_rows,
)


def ev(seq: int, kind: str, node: str = "", *, task: str = "", step: int | None = None,
       ns: str = "", checkpoint: str = "", duration: float | None = None,
       **payload: Any) -> dict[str, Any]:
    return {"seq": seq, "kind": kind, "node": node, "namespace": ns, "step": step,
            "task_id": task, "checkpoint_id": checkpoint, "payload": payload,
            "duration_ms": duration, "created_at": None}


def checkpoint(seq: int, step: int, source: str = "loop") -> dict[str, Any]:
    return ev(seq, "checkpoint", step=step, checkpoint=f"cp{seq}", source=source, next=[])


def node(first: int, name: str, task: str, step: int, update: dict[str, Any]
         ) -> list[dict[str, Any]]:
    """A node that ran alone in its step: started, finished, then its step's checkpoint."""
    return [ev(first, "node_started", name, task=task, step=step),
            ev(first + 1, "node_finished", name, task=task, step=step, duration=812.0,
               update=update),
            checkpoint(first + 2, step)]


ECHO = [ev(1, "run_started"), checkpoint(2, -1, "input"), checkpoint(3, 0),
        *node(4, "step", "a", 1, {"n": 1, "trail": ["step1"]}),
        *node(7, "done", "b", 2, {"result": {"n": 1}}),
        ev(10, "run_succeeded", output={"n": 1})]


def test_a_node_execution_is_one_row_with_its_start_end_and_checkpoint():
    rows = timeline_rows(ECHO)
    assert [(r.title, [e["seq"] for e in r.events]) for r in rows] == [
        ("Run started", [1]), ("Checkpoint", [2]), ("Checkpoint", [3]),
        ("step", [4, 5, 6]), ("done", [7, 8, 9]), ("Run succeeded", [10])]
    step = rows[3]
    assert step.status == "finished" and step.duration == "812.0 ms"
    assert step.summary == 'n = 1 · trail = ["step1"]'
    assert step.checkpoint_id == "cp6"


def test_bookkeeping_rows_are_marked_and_what_the_graph_did_is_not():
    shown = [r.title for r in timeline_rows(ECHO) if not r.bookkeeping]
    assert shown == ["step", "done", "Run succeeded"]


def test_a_node_appended_live_runs_first_and_is_completed_in_place():
    timeline = Timeline()
    for event in ECHO[:4]:  # ... up to the start of "step"
        timeline.add(event)
    [(row, events, new)] = timeline.touched(4, 4)
    assert new and row.status == "running" and row.duration == "" and events == [ECHO[3]]
    for event in ECHO[4:6]:  # its end and its checkpoint arrive in the next batch
        timeline.add(event)
    [(again, events, new)] = timeline.touched(5, 6)
    assert again is row and not new  # the same row, to complete in place
    assert [e["seq"] for e in events] == [5, 6]  # only what the page does not have yet
    assert row.status == "finished" and row.summary.startswith("n = 1")


def test_a_failed_node_says_its_error_and_how_long_it_ran():
    rows = timeline_rows([
        ev(1, "node_started", "step", task="x", step=1),
        ev(2, "node_failed", "step", task="x", step=1, duration=1500.0,
           error="RuntimeError: step 2 failed on purpose"),
        ev(3, "run_failed", error="RuntimeError: step 2 failed on purpose")])
    failed = rows[0]
    assert failed.status == "failed" and failed.status_label == "failed"
    assert failed.summary == "RuntimeError: step 2 failed on purpose"
    assert failed.duration == "1.5 s"
    assert rows[1].summary == "RuntimeError: step 2 failed on purpose"


def test_a_question_and_its_answer_stay_in_the_row_of_the_node_that_asked():
    events = [
        ev(1, "node_started", "ask", task="q", step=2),
        ev(2, "interrupt_raised", "ask", task="q", step=2, interrupt_id="i1",
           value={"prompt": "Say something"}),
        ev(3, "run_resumed"),
        ev(4, "interrupt_answered", "ask", interrupt_id="i1", answer="hello",
           answered_by="olga"),
        ev(5, "node_started", "ask", task="q", step=2),  # the same task, resumed
        ev(6, "node_finished", "ask", task="q", step=2, duration=2.0, update={"answer": "hello"}),
        checkpoint(7, 2)]
    timeline = Timeline()
    for event in events[:2]:
        timeline.add(event)
    assert timeline.rows["t-q"].status == "waiting"
    for event in events[2:]:
        timeline.add(event)
    rows = list(timeline.rows.values())
    assert [(r.key, [e["seq"] for e in r.events]) for r in rows] == [
        ("t-q", [1, 2, 4, 5, 6, 7]), ("e-3", [3])]
    assert rows[0].status == "finished"
    assert rows[0].summary == 'answered "hello" by olga to “Say something” · answer = "hello"'
    assert answers_upto(events[:3]) == []
    assert answers_upto(events) == [{"seq": 4, "node": "ask", "question": "Say something",
                                     "answer": "hello", "by": "olga"}]
    # replay by node stops where the question was asked, then where the node ended
    assert replay_stops(rows) == [2, 7]


def test_a_step_of_parallel_nodes_keeps_its_checkpoint_apart():
    rows = timeline_rows([
        ev(1, "node_started", "work", task="w1", step=3),
        ev(2, "node_started", "work", task="w2", step=3),
        ev(3, "model_started", "work", task="w2", step=3),
        ev(4, "node_finished", "work", task="w1", step=3, update={"tasks": {"1": {}}}),
        ev(5, "node_finished", "work", task="w2", step=3, update={"tasks": {"2": {}}}),
        checkpoint(6, 3)])
    assert [[e["seq"] for e in r.events] for r in rows] == [[1, 4], [2, 3, 5], [6]]
    assert rows[1].summary.endswith("1 model call")
    assert rows[2].bookkeeping


def test_replay_by_node_stops_at_the_end_of_each_node_run_and_the_visible_rows():
    assert replay_stops(timeline_rows(ECHO)) == [6, 9, 10]


def test_rows_are_filtered_by_node_and_by_the_kind_of_an_event_in_them():
    rows = timeline_rows(ECHO)
    assert [r.title for r in rows_filter(rows, node="done")] == ["done"]
    assert [r.title for r in rows_filter(rows, kind="node_finished")] == ["step", "done"]
    assert [r.title for r in rows_filter(rows, node="step", kind="run_succeeded")] == []
    assert len(rows_filter(rows)) == len(rows)


def test_a_long_update_is_summed_up_in_three_channels_and_short_values():
    [row] = [r for r in timeline_rows(node(1, "prepare", "p", 1, {
        "schema": {"x" * 80: 1}, "a": 1, "b": 2, "c": 3, "d": 4})) if r.key == "t-p"]
    assert row.summary.endswith(" · a = 1 · b = 2 · +2 more")
    assert len(row.summary.split(" · ")[0]) <= len("schema = ") + 48


def test_a_row_keeps_what_its_lines_show_not_the_updates_or_model_messages():
    rows = timeline_rows([ev(1, "node_started", "decide", task="d", step=1),
                          ev(2, "model_started", "decide", task="d", messages=["y" * 9999]),
                          ev(3, "node_finished", "decide", task="d", step=1,
                             update={"big": "x" * 9999})])
    [row] = rows
    assert "x" * 100 not in repr(row.events) and "y" * 100 not in repr(row.events)
    assert row.summary.startswith('big = "xxx') and row.summary.endswith("1 model call")


def test_an_operators_state_edit_is_a_row_of_its_own_never_hidden():
    [edit] = timeline_rows([ev(11, "checkpoint", step=3, checkpoint="cpE", source="update",
                               by="olga", values={"n": 99}, as_node="", next=["done"])])
    assert edit.title == "State edited" and not edit.bookkeeping
    assert edit.summary == "by olga: n = 99"


def test_a_node_the_run_ended_under_is_stopped_and_redrawn_with_the_final_event():
    """A run cancelled (or failed elsewhere) while a node ran or waited: the node's row says
    stopped, not running for ever, and the batch with the final event redraws that row."""
    timeline = Timeline()
    for event in [ev(1, "run_started"), ev(2, "node_started", "slow", task="a", step=1),
                  ev(3, "node_started", "ask", task="b", step=1),
                  ev(4, "interrupt_raised", "ask", task="b", step=1, interrupt_id="i1"),
                  ev(5, "node_started", "quick", task="c", step=1),
                  ev(6, "node_finished", "quick", task="c", step=1, update={}),
                  # a resume replays a finished task's start: it does not open it again
                  ev(7, "node_started", "done", task="d", step=1),
                  ev(8, "node_finished", "done", task="d", step=1, update={}),
                  ev(9, "node_started", "done", task="d", step=1)]:
        timeline.add(event)
    assert [r.status for r in timeline.rows.values() if r.kind == "node"] == [
        "running", "waiting", "finished", "running"]
    timeline.add(ev(10, "run_cancelled", reason="cancelled", by="olga"))
    rows = {r.node: r for r in timeline.rows.values() if r.kind == "node"}
    assert {n: (r.status, r.status_label) for n, r in rows.items()} == {
        "slow": ("cancelled", "stopped"), "ask": ("cancelled", "stopped"),
        "quick": ("finished", "done"), "done": ("finished", "done")}
    redrawn = {row.key: (events, new) for row, events, new in timeline.touched(10, 10)}
    assert redrawn["t-a"] == ([], False) and redrawn["t-b"] == ([], False)
    assert "t-c" not in redrawn and redrawn["e-10"][1] is True
