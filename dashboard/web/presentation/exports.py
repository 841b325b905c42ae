"""A run as one versioned JSON document: header, inputs, events, model calls, result.

The shape is documented in docs/export.md; a change of it bumps :data:`EXPORT_VERSION`.
Reads only (a selector of a kind): the API's ``GET /api/runs/<id>/export/`` renders it.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from dashboard.models import Run, RunEvent
from dashboard.runs.figures import figures_of
from dashboard.runs.modelcalls import messages_of
from dashboard.runs.outcome import run_outcome
from dashboard.runs.record import event_dict

EXPORT_VERSION = 1
"""The version of the document's shape (``"planwatch_export"``)."""


def _iso(moment: Any) -> str | None:
    return moment.isoformat() if moment else None


def run_export(*, run: Run) -> dict[str, Any]:
    """The whole of ``run`` as a JSON-ready dict (see docs/export.md)."""
    events = [event_dict(e) for e in RunEvent.objects.filter(run_id=run.id).order_by("seq")]
    interrupts = [
        {"interrupt_id": i.interrupt_id, "node": i.node, "namespace": i.namespace,
         "question": i.payload, "status": i.status, "answer": i.answer,
         "answered_by": i.answerer_name or None, "answered_at": _iso(i.answered_at),
         "checkpoint_id": i.checkpoint_id or None, "created_at": _iso(i.created_at)}
        for i in run.interrupts.order_by("created_at", "id")
    ]
    checkpoints = [{"checkpoint_id": e["checkpoint_id"], "namespace": e["namespace"],
                    "step": e["step"], "seq": e["seq"]}
                   for e in events if e["kind"] == RunEvent.Kind.CHECKPOINT]
    return {
        "planwatch_export": EXPORT_VERSION,
        "header": {
            "id": str(run.id), "graph": run.graph, "graph_version": run.graph_version,
            "thread_id": run.thread_id,
            "conversation": str(run.conversation_id) if run.conversation_id else None,
            "status": run.status, "current_node": run.current_node,
            "created_by": run.creator_name or None, "created_at": _iso(run.created_at),
            "started_at": _iso(run.started_at), "finished_at": _iso(run.finished_at),
            "last_seq": run.last_seq,
            "parent": str(run.parent_id) if run.parent_id else None,
            "forked_from_checkpoint": run.forked_from_checkpoint or None,
            "model_calls": run.model_calls, "input_tokens": run.input_tokens,
            "output_tokens": run.output_tokens, "total_tokens": run.total_tokens,
            "cost_usd": run.cost_usd,
            "figures": figures_of(events, now=timezone.now()).as_dict(),
            "outcome": outcome.as_dict() if (outcome := run_outcome(
                graph=run.graph, status=run.status, output=run.output)) else None,
        },
        "inputs": {"input": run.input, "configurable": run.configurable,
                   "context": run.context, "metadata": run.metadata,
                   "interrupt_before": run.interrupt_before,
                   "interrupt_after": run.interrupt_after, "fork_edit": run.fork_edit},
        "events": events,
        "model_calls": messages_of(events),
        "interrupts": interrupts,
        "result": {"status": run.status, "output": run.output,
                   "error": run.error_message or None,
                   "traceback": run.error_traceback or None},
        "checkpoints": checkpoints,
    }
