"""Python's cyclic garbage collector in Planwatch's long-running processes.

A served process or a worker holds, for as long as it lives, a large heap built as it
starts: Django's apps, the URLconf and its views, LangGraph, the graphs, procrastinate.
Python's collector walks every object it tracks at each full collection, and the older
generation at each middle one. Measured at 50 runs in flight (benchmarks/ANALYSIS.md, stop
58), a full collection stopped the worker's event loop, every run's stream with it, for
136 to 142 ms, and a middle one a web process's for up to 29 ms.

:func:`settle` moves what a ready process holds into the collector's permanent generation
(``gc.freeze``), which no collection walks: it is still freed when nothing refers to it,
only its reference cycles are no longer looked for. After it, the worker's full collection
took 20 ms and the web's longest middle one 18 ms.
"""

from __future__ import annotations

import gc


def settle() -> int:
    """Collect what startup left, then freeze the rest (call it once the process is ready,
    before it serves); how many objects are frozen now."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
