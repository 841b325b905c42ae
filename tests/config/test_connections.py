"""Connections per process: two web processes and two workers fit PostgreSQL's default
``max_connections`` (100, 3 kept for superusers) with room for commands and psql."""

from __future__ import annotations

import os

from django.conf import settings

from config.connections import (
    DEFAULT_RUN_DB_POOL_SIZE,
    DJANGO_POOL_SIZES,
    process_connections,
)

USABLE = 100 - 3  # max_connections minus superuser_reserved_connections (defaults)
ROOM = 15  # migrations, manage.py commands (4 each), psql, a backup


def defaults(role: str, *, executes_runs: bool) -> int:
    return sum(process_connections(
        role=role, django_pool=DJANGO_POOL_SIZES[role],
        run_db_pool_size=DEFAULT_RUN_DB_POOL_SIZE, max_concurrent=200,
        executes_runs=executes_runs).values())


def test_two_web_processes_and_two_workers_fit_the_default_max_connections():
    web = defaults("web", executes_runs=False)  # runs go to the workers
    worker = defaults("worker", executes_runs=True)
    print(f"\nweb {web}, worker {worker}: 2 x web + 2 x worker = {2 * web + 2 * worker}")
    assert 2 * web + 2 * worker <= USABLE - ROOM


def test_one_web_process_executing_its_own_runs_fits_with_a_second_beside_it():
    assert 2 * defaults("web", executes_runs=True) <= USABLE - ROOM


def test_the_settings_take_the_defaults_counted_here():
    if "PLANWATCH_RUN_DB_POOL_SIZE" not in os.environ:
        assert settings.PLANWATCH["RUN_DB_POOL_SIZE"] == DEFAULT_RUN_DB_POOL_SIZE
    assert settings.POOL_SIZES == DJANGO_POOL_SIZES
