"""An axis people can read: linear time with labelled break marks where waits are shortened,
no label twice, sub-millisecond durations and small costs as they are."""

from __future__ import annotations

import uuid
from itertools import pairwise

from dashboard.web.presentation.waterfall import Axis, seconds_text, waterfall_view
from dashboard.web.templatetags.planwatch import usd
from tests.support.waterfall import Log, acquisition_log, fold_of


def test_sub_millisecond_durations_read_less_than_one_ms_not_zero():
    assert seconds_text(0.0003) == "< 1 ms" and seconds_text(0.004) == "4 ms"
    assert seconds_text(0.0) == "0 ms"


def test_costs_keep_their_significant_digits():
    assert usd(0.000036) == "$0.000036" and usd(0.0000361) == "$0.000036"
    assert usd(0.0123) == "$0.0123" and usd(1.5) == "$1.50" and usd(0) == "$0"
    assert usd(None) == ""


def test_a_shortened_wait_is_a_break_mark_labelled_with_the_time_left_out(db):
    fold = fold_of(acquisition_log())  # 5 s of work, a 10 s wait drawn shortened
    view = waterfall_view(fold, run_id=uuid.uuid4())
    ((left, width, text),) = view.breaks
    assert text == "9.5 s left out" and 0 < left < left + width < 100
    html = str(view.ticks)
    assert "9.2 s" not in html  # no label inside the break: it is the mark's
    labels = [label for _, label in view.ticks]
    assert len(labels) == len(set(labels)) and labels[0] == "0 ms" and labels[-1] == "15.0 s"


def test_an_axis_never_repeats_a_label():
    log = Log().add(0, "run_started").node(0, 0.0001, "tick", "t1", 1).add(0.0002,
                                                                           "run_succeeded")
    fold = fold_of(log)
    labels = [label for _, label in Axis.of(fold, end=fold.last).ticks()]
    assert len(labels) == len(set(labels)), labels


def test_shortened_waits_keep_their_widths_ordered_by_length():
    # three waits of 74 s, 19.4 s and 300 s around 3 s of work: each drawn shortened, the
    # longer ones wider, each with its break mark naming the time left out
    log = Log().add(0, "run_started")
    at, waits = 0.0, (74.0, 19.4, 300.0)
    for i, wait in enumerate(waits, 1):
        log.node(at, at + 1, "decide", f"t{i}", i)
        log.add(at + 1, "interrupt_raised", "ask_user", payload={"interrupt_id": f"q{i}"})
        log.add(at + 1 + wait, "run_resumed")
        log.add(at + 1 + wait, "interrupt_answered", payload={"interrupt_id": f"q{i}"})
        at += 1 + wait
    log.add(at, "run_succeeded")
    fold = fold_of(log)
    axis = Axis.of(fold, end=fold.last)
    drawn = [w for _, _, w in axis.breaks]
    assert len(drawn) == 3 and drawn[1] < drawn[0] < drawn[2]
    assert all(w < real for w, real in zip(drawn, waits, strict=True))
    view = waterfall_view(fold, run_id=uuid.uuid4())
    widths = [width for _, width, _ in view.breaks]
    assert widths[1] < widths[0] < widths[2]
    assert [text for _, _, text in view.breaks][2].endswith("left out")
    # the shortened waits still leave the work most of the axis
    assert sum(widths) < 60
    # each labelled on the axis's second line, within the axis: from where it begins, or
    # (past 70 %) up to where it ends
    for (left, width, text), (at, ends, cut) in zip(view.breaks, view.break_labels,
                                                     strict=True):
        assert text == f"{cut} left out"
        assert (at, ends) == ((round(left + width, 3), True) if left > 70 else (left, False))


def test_ticks_fall_on_round_times_evenly_spaced_and_leave_room_for_the_end():
    def ticks(seconds):
        return Axis(end=seconds, breaks=(), shown=seconds).ticks()

    assert [label for _, label in ticks(13.7)] == ["0 ms", "5.0 s", "10.0 s", "13.7 s"]
    assert [label for _, label in ticks(26.0)] == ["0 ms", "10.0 s", "26.0 s"]
    assert [label for _, label in ticks(1.0)] == ["0 ms", "0.25 s", "0.50 s", "0.75 s", "1.0 s"]
    for seconds in (0.37, 1.0, 7.3, 13.7, 26.0, 58.0, 75.3, 600.0, 3700.0):
        places = [pct for pct, _ in ticks(seconds)]
        gaps = [b - a for a, b in pairwise(places[:-1])]
        assert len({round(g, 2) for g in gaps}) <= 1, (seconds, places)  # evenly spaced
        assert all(b - a >= 25 for a, b in pairwise(places)), places
