"""Checkpoint writes across a short database storm: retried, bounded, then failing."""

from __future__ import annotations

import asyncio

import pytest
from psycopg import OperationalError
from psycopg_pool import PoolTimeout

from dashboard.runs.savers import WriteWatch


def flaky(failures: list[Exception]):
    """A write that raises each of ``failures`` in turn, then saves; and its call count."""
    calls: list[int] = []

    async def write(config, checkpoint):
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return config

    return write, calls


def test_a_checkpoint_write_is_retried_across_a_short_storm(settings):
    settings.PLANWATCH = {**settings.PLANWATCH, "CHECKPOINT_RETRY_SECONDS": 10}
    watch = WriteWatch()
    write, calls = flaky([PoolTimeout("couldn't get a connection after 5.00 sec"),
                          OperationalError("terminating connection due to administrator "
                                           "command"),
                          OperationalError("the connection is lost"),
                          PoolTimeout("couldn't get a connection after 5.00 sec")])
    saved = asyncio.run(watch.guard_checkpoints(write)({"c": 1}, {"id": "cp-1"}))
    assert saved == {"c": 1} and len(calls) == 5
    assert watch.error is None and watch.saved == {"cp-1"}
    watch.check()  # nothing to raise


def test_a_storm_longer_than_the_window_fails_the_run(settings):
    settings.PLANWATCH = {**settings.PLANWATCH, "CHECKPOINT_RETRY_SECONDS": 0.5}
    watch = WriteWatch()
    write, calls = flaky([PoolTimeout("no connection")] * 100)
    with pytest.raises(PoolTimeout):
        asyncio.run(watch.guard(write)({}, {"id": "cp-1"}))
    assert 2 <= len(calls) < 10  # 0.1 + 0.2 s waits, then the window is spent
    assert isinstance(watch.error, PoolTimeout)


def test_a_value_the_saver_cannot_store_is_not_retried(settings):
    watch = WriteWatch()
    write, calls = flaky([OverflowError("int too big to convert")])
    with pytest.raises(OverflowError):
        asyncio.run(watch.guard(write)({}, {"id": "cp-1"}))
    assert len(calls) == 1
