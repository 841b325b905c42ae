"""Retention: what is older than N days goes (``manage.py prune``, or periodically).

A finished run (succeeded, failed, cancelled) that finished before the cut-off is deleted
with its events, its questions and its LangGraph checkpoints (those of its thread's
checkpoint thread that name it); a LangGraph thread left with no run, no cron and no
change since the cut-off goes too. Runs that are not finished (waiting on a question,
paused) stay, but the texts of their model calls made before the cut-off (prompts and
answers) are dropped, as ``PLANWATCH_TRACE_CONTENT=false`` would have kept them.

``keep_audit``: a pruned run keeps its row (who started it, its outcome, tokens and cost),
its questions with their answers (who answered what, when) and its lifecycle and question
events; its node, checkpoint, custom and model-call events and its checkpoints go.

``PLANWATCH_RETENTION_DAYS`` (unset or 0: keep everything) has every web process's cron
poll prune once every :data:`PERIODIC_EVERY` seconds (``PLANWATCH_RETENTION_KEEP_AUDIT``
for ``keep_audit``); a second process pruning at the same time finds nothing left to do.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from dashboard.checkpoints import checkpoints_delete
from dashboard.models import Cron, LangGraphRun, Run, RunEvent, Thread
from dashboard.runs import states, store
from dashboard.runs.conf import planwatch_setting

logger = logging.getLogger("planwatch.retention")

BATCH = 500
"""Runs deleted in one transaction (short ones: runs keep writing meanwhile)."""

AUDIT_EVENTS = (
    RunEvent.Kind.RUN_STARTED, RunEvent.Kind.RUN_RESUMED, RunEvent.Kind.RUN_RECOVERED,
    RunEvent.Kind.RUN_SUCCEEDED, RunEvent.Kind.RUN_FAILED, RunEvent.Kind.RUN_CANCELLED,
    RunEvent.Kind.RUN_PAUSED, RunEvent.Kind.RUN_FORKED, RunEvent.Kind.RUN_CONTINUED,
    RunEvent.Kind.BREAKPOINTS_CHANGED, RunEvent.Kind.INTERRUPT_RAISED,
    RunEvent.Kind.INTERRUPT_ANSWERED)
"""The events ``keep_audit`` keeps: who started, resumed, answered, cancelled, and when."""

MODEL_EVENTS = (RunEvent.Kind.MODEL_STARTED, RunEvent.Kind.MODEL_FINISHED)
MODEL_TEXTS = ("messages", "output", "prompts")
"""What a model-call event's payload holds of the texts themselves."""

PERIODIC_EVERY = 3600.0
"""Seconds between two periodic prunes of one process."""


@dataclass(frozen=True)
class Pruned:
    """What one prune removed."""

    runs: int  # runs deleted (keep_audit: runs whose detail was removed)
    events: int  # events deleted
    checkpoint_threads: int  # checkpoint threads deleted
    threads: int  # LangGraph threads deleted
    model_texts: int  # model-call events of kept runs whose texts were dropped


def runs_prune(*, older_than: timedelta, keep_audit: bool = False,
               now: datetime | None = None) -> Pruned:
    """Remove what finished (or was written) more than ``older_than`` ago; see the module."""
    if older_than <= timedelta(0):
        raise ValueError(f"older_than={older_than} must be positive: a prune of runs that "
                         "finished in the future would delete every finished run")
    cutoff = (now or timezone.now()) - older_than
    runs = events = held = 0
    old = Run.objects.filter(state__in=states.FINISHED, finished_at__lt=cutoff)
    if keep_audit:  # a run already pruned has no detail events left: skip it
        old = old.filter(Exists(RunEvent.objects.filter(
            run_id=OuterRef("id")).exclude(kind__in=AUDIT_EVENTS)))
    while batch := list(old.order_by("finished_at").values_list("id", "thread_id",
                                                                "conversation_id")[:BATCH]):
        deleted, checkpoint_threads = _prune_batch(batch, keep_audit=keep_audit)
        runs += len(batch)
        events += deleted
        held += len(batch)
        checkpoints_delete(runs=checkpoint_threads)
    threads = _threads_delete(cutoff)
    texts = _model_texts_drop(cutoff)
    return Pruned(runs=runs, events=events, checkpoint_threads=held, threads=threads,
                  model_texts=texts)


def _prune_batch(batch: list[tuple[Any, str, Any]], *, keep_audit: bool
                 ) -> tuple[int, list[tuple[str, str]]]:
    """Delete one batch of runs (or their detail); the events deleted and the runs whose
    checkpoints go, as ``(checkpoint thread, run id)``."""
    ids = [run_id for run_id, _, _ in batch]
    named: dict[Any, list[str]] = {}  # each run's LangGraph runs, which its checkpoints name
    for run_id, langgraph_run_id in LangGraphRun.objects.filter(run_id__in=ids).values_list(
            "run_id", "id"):
        named.setdefault(run_id, []).append(str(langgraph_run_id))
    with transaction.atomic():
        if keep_audit:
            deleted, _ = RunEvent.objects.filter(run_id__in=ids).exclude(
                kind__in=AUDIT_EVENTS).delete()
        else:
            deleted = RunEvent.objects.filter(run_id__in=ids).count()
            Run.objects.filter(id__in=ids).delete()  # events and questions with them
            for thread_id in {conversation for _, _, conversation in batch if conversation}:
                store.settle_thread(thread_id)
    return deleted, [(held, langgraph_run_id) for run_id, held, _ in batch
                     for langgraph_run_id in named.get(run_id, [str(run_id)])]


def _threads_delete(cutoff: datetime) -> int:
    """LangGraph threads with no run and no cron, unchanged since ``cutoff``."""
    crons = Cron.objects.filter(thread__isnull=False).values("thread_id")
    deleted, _ = (Thread.objects.filter(updated_at__lt=cutoff, runs__isnull=True)
                  .exclude(id__in=crons).delete())
    return deleted


def _model_texts_drop(cutoff: datetime) -> int:
    """Drop the prompts and answers of model calls made before ``cutoff`` by kept runs."""
    dropped, last = 0, 0
    events = (RunEvent.objects.filter(kind__in=MODEL_EVENTS, created_at__lt=cutoff)
              .exclude(payload__has_key="redacted").only("id", "payload").order_by("id"))
    while batch := list(events.filter(id__gt=last)[:BATCH]):
        last = batch[-1].id
        for event in batch:
            event.payload = {key: value for key, value in event.payload.items()
                             if key not in MODEL_TEXTS} | {"redacted": True}
        RunEvent.objects.bulk_update(batch, ["payload"])
        dropped += len(batch)
    return dropped


_last_periodic: float | None = None  # time.monotonic() of this process's last prune


def prune_periodically() -> Pruned | None:
    """Prune by ``PLANWATCH_RETENTION_DAYS`` if it is set and this process has not pruned
    within :data:`PERIODIC_EVERY` seconds (the cron poll calls this)."""
    global _last_periodic
    days = float(planwatch_setting("RETENTION_DAYS") or 0)
    if days <= 0:
        return None
    if _last_periodic is not None and time.monotonic() - _last_periodic < PERIODIC_EVERY:
        return None
    _last_periodic = time.monotonic()
    pruned = runs_prune(older_than=timedelta(days=days),
                        keep_audit=bool(planwatch_setting("RETENTION_KEEP_AUDIT")))
    logger.info("retention (%g days): %s", days, pruned)
    return pruned
