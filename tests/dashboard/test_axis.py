"""An axis people can read: linear time with labelled break marks where waits are shortened,
no label twice, sub-millisecond durations and small costs as they are."""

from __future__ import annotations

import uuid

from dashboard.web.presentation.waterfall import Axis, seconds_text, waterfall_view
from dashboard.web.templatetags.planwatch import usd
from tests.dashboard.test_waterfall import Log, acquisition_log, fold_of


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
    assert text == "9.7 s left out" and 0 < left < left + width < 100
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
