"""How many PostgreSQL connections one process may open, pool by pool.

PostgreSQL refuses connections past ``max_connections`` (100 by default, 3 of them kept
for superusers), shared by every process. Each Planwatch process opens at most:

- Django's pool: ``DB_POOL_MAX_SIZE`` (by role: :data:`DJANGO_POOL_SIZES`);
- a process that executes runs: the checkpoint saver's pool (``RUN_DB_POOL_SIZE``) and
  its event log's (half as large), :func:`run_pool_sizes`;
- a web process: the checkpoint read pool (:data:`CHECKPOINT_READ_POOL_SIZE`);
- a procrastinate worker: its queue pool (:data:`QUEUE_POOL_SIZE`) and one LISTEN
  connection.

:func:`process_connections` adds them up; the README's settings table shows the sums.
"""

from __future__ import annotations

DJANGO_POOL_SIZES = {"web": 12, "worker": 4, "command": 4}
"""Django's pool by process role: a web process's requests and watchers each hold one only
for a statement; a worker's runs write through the run pools below."""
CHECKPOINT_READ_POOL_SIZE = 5
"""A web process's pool for the saver's reads (trace pages, ``values`` streams)."""
QUEUE_POOL_SIZE = 3
"""A procrastinate worker's pool (job fetches, heartbeats, job status writes)."""
QUEUE_LISTEN_CONNECTIONS = 1
"""A procrastinate worker's LISTEN connection (outside its pool)."""
DEFAULT_RUN_DB_POOL_SIZE = 8
"""The checkpoint saver's pool of a process that executes runs (its event log's: half)."""


def run_pool_sizes(*, run_db_pool_size: int, max_concurrent: int) -> tuple[int, int]:
    """The (saver, event log) pool sizes of a process that executes runs."""
    saver = max(2, min(max_concurrent, run_db_pool_size))
    return saver, max(2, saver // 2)


def process_connections(*, role: str, django_pool: int, run_db_pool_size: int,
                        max_concurrent: int, executes_runs: bool) -> dict[str, int]:
    """The most connections each pool of one process may open (role ``web``, ``worker``
    or ``command``; ``executes_runs``: the in-process executor, or a worker)."""
    pools = {"django": django_pool}
    if executes_runs:
        saver, events = run_pool_sizes(run_db_pool_size=run_db_pool_size,
                                       max_concurrent=max_concurrent)
        pools |= {"checkpoint saver": saver, "event log": events}
    if role == "web":
        pools["checkpoint reads"] = CHECKPOINT_READ_POOL_SIZE
    if role == "worker":
        pools["queue"] = QUEUE_POOL_SIZE + QUEUE_LISTEN_CONNECTIONS
    return pools
