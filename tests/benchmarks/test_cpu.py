"""How ``benchmarks.cpu`` files a py-spy sample (by the work its innermost frame names) and
scales its figures to the machine's speed (``--calibrate``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.cpu import breakdown, breakdown_table, calibrated, calibration, category

LOOP = ("process 1:\"manage.py planwatch_worker\";Thread.run (threading.py:1010);"
        "BaseEventLoop.run_forever (asyncio/base_events.py:638);"
        "Executor._run_loop (dashboard/runs/executor.py:118);Handle._run (asyncio/events.py:84)")


def test_a_sample_goes_to_the_innermost_frame_that_names_its_work():
    write = f"{LOOP};WriteBehind._awrite (dashboard/runs/record.py:179);" \
            "QuerySet.__iter__ (django/db/models/query.py:473)"
    assert category(write) == "event writes (record, store)"  # not "ORM"
    saver = f"{LOOP};_aconsume (dashboard/runs/execution.py:586);" \
            "Pregel.astream (pregel/main.py:3571);aretried (dashboard/runs/savers.py:83);" \
            "AsyncConnection.wait (psycopg/connection_async.py:532)"
    assert category(saver) == "checkpoint writes (savers)"  # not LangGraph, not the engine
    assert category(f"{LOOP};Pregel.astream (pregel/main.py:3553)") == "LangGraph itself"
    assert category(LOOP) == "event loop, threads, idle"  # the loop host names no work


def test_a_poller_or_a_stop_owns_what_it_calls():
    stop = f"{LOOP};after_stopped (dashboard/runs/dispatch.py:136);" \
           "roll_back_requested (dashboard/runs/store.py:748)"
    assert category(stop) == "after a run stops (dispatch.after_stopped)"
    look = "poll_once (dashboard/deadlines.py:104);QuerySet.first (django/db/models/query.py:1)"
    assert category(look) == "pollers (deadlines, notices, crons)"


def test_the_table_shares_each_file_and_gives_ms_with_the_process_cpu(tmp_path: Path):
    raw = tmp_path / "worker.txt"
    raw.write_text(f"{LOOP};Pregel.astream (pregel/main.py:3553) 3\n{LOOP} 1\n")
    assert breakdown(raw) == {"LangGraph itself": 3, "event loop, threads, idle": 1}
    table = breakdown_table([raw], {"worker": 40.0})
    assert "| LangGraph itself | 75% (30.0) |" in table


def test_calibrated_figures_are_the_cpu_figures_at_a_one_second_loop():
    runs = calibrated({"cpu_ms_per_run": {"web": 60.0, "worker": 120.0},
                       "cpu_ms_per_run_total": 180.0}, 1.1, 1.3)
    assert runs["calibration_s"] == [1.1, 1.3]
    assert runs["cpu_ms_per_run_at_1s_loop"] == {"web": 50.0, "worker": 100.0}
    assert runs["cpu_ms_per_run_total_at_1s_loop"] == 150.0
    assert runs["cpu_ms_per_run_total"] == 180.0  # the measured figure stays
    starts = calibrated({"web_cpu_ms_per_start_less_idle": 16.0}, 0.75, 0.85)
    assert starts["web_cpu_ms_per_start_less_idle_at_1s_loop"] == 20.0


def test_the_calibration_loop_takes_cpu_time():
    assert calibration() > 0.01


def test_the_barrier_lets_parties_through_together_round_after_round(tmp_path):
    import threading

    from benchmarks.cpu import Barrier

    passed: list[tuple[str, int]] = []

    def party(name: str) -> None:
        barrier = Barrier(tmp_path, 2)
        for round_ in (1, 2):
            barrier.wait(timeout=30)
            passed.append((name, round_))

    first = threading.Thread(target=party, args=("a",))
    first.start()
    first.join(0.3)
    assert passed == []  # alone at the barrier: it waits
    party("b")
    first.join(30)
    assert sorted(passed) == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]


def test_a_party_left_alone_is_told_so(tmp_path):
    from benchmarks.cpu import Barrier

    with pytest.raises(TimeoutError, match="2 parties never met"):
        Barrier(tmp_path, 2).wait(timeout=0.2)
