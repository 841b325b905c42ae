"""A run as one versioned JSON document: header, inputs, events, model calls, result.

The shape is documented in docs/export.md; a change of it bumps :data:`EXPORT_VERSION`.
Reads only (a selector of a kind): the API's ``GET /api/runs/<id>/export/`` streams it
(:func:`run_export_json`), a piece at a time, in the bytes DRF's ``JSONRenderer`` gives
the whole document (:func:`run_export`): the events are read in chunks and the model
calls joined as their events go by, so a run of any size is exported in bounded memory.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone
from rest_framework.utils.encoders import JSONEncoder

from dashboard.models import Run, RunEvent
from dashboard.runs.figures import figures_of
from dashboard.runs.modelcalls import messages_of
from dashboard.runs.record import event_dict

CHUNK = 500
"""Events read from the database at a time while a document is streamed."""
MODEL_KINDS = (RunEvent.Kind.MODEL_STARTED, RunEvent.Kind.MODEL_FINISHED)

EXPORT_VERSION = 1
"""The version of the document's shape (``"planwatch_export"``)."""


def _iso(moment: Any) -> str | None:
    return moment.isoformat() if moment else None


def _interrupts(run: Run) -> list[dict[str, Any]]:
    return [
        {"interrupt_id": i.interrupt_id, "node": i.node, "namespace": i.namespace,
         "question": i.payload, "status": i.status, "answer": i.answer,
         "answered_by": i.answerer_name or None, "answered_at": _iso(i.answered_at),
         "checkpoint_id": i.checkpoint_id or None, "created_at": _iso(i.created_at)}
        for i in run.interrupts.order_by("created_at", "id")
    ]


def _checkpoint(event: dict[str, Any]) -> dict[str, Any]:
    return {"checkpoint_id": event["checkpoint_id"], "namespace": event["namespace"],
            "step": event["step"], "seq": event["seq"]}


def _header(run: Run) -> dict[str, Any]:
    return {
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
        # the figures the pages show, folded over the events read in chunks
        "figures": figures_of(_events(run), now=timezone.now()).as_dict(),
        # how it ended, as stored when it stopped (the API's outcome and outcome_reason)
        "outcome": run.outcome, "outcome_reason": run.outcome_reason,
    }


def _inputs(run: Run) -> dict[str, Any]:
    return {"input": run.input, "configurable": run.configurable,
            "context": run.context, "metadata": run.metadata,
            "interrupt_before": run.interrupt_before,
            "interrupt_after": run.interrupt_after, "fork_edit": run.fork_edit}


def _result(run: Run) -> dict[str, Any]:
    return {"status": run.status, "output": run.output,
            "error": run.error_message or None,
            "traceback": run.error_traceback or None}


def run_export(*, run: Run) -> dict[str, Any]:
    """The whole of ``run`` as a JSON-ready dict (see docs/export.md)."""
    events = [event_dict(e) for e in RunEvent.objects.filter(run_id=run.id).order_by("seq")]
    return {
        "planwatch_export": EXPORT_VERSION,
        "header": _header(run),
        "inputs": _inputs(run),
        "events": events,
        "model_calls": messages_of(events),
        "interrupts": _interrupts(run),
        "result": _result(run),
        "checkpoints": [_checkpoint(e) for e in events if e["kind"] == RunEvent.Kind.CHECKPOINT],
    }


def _events(run: Run, kinds: Iterable[str] | None = None) -> Iterator[dict[str, Any]]:
    """The run's events (of ``kinds``), in seq order, read :data:`CHUNK` at a time."""
    found = RunEvent.objects.filter(run_id=run.id)
    if kinds is not None:
        found = found.filter(kind__in=list(kinds))
    for event in found.order_by("seq").iterator(chunk_size=CHUNK):
        yield event_dict(event)


def _model_calls(events: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """:func:`~dashboard.runs.modelcalls.messages_of`, a call at a time: each call is
    given once it finished and every call started before it was given (a call still in
    flight holds back only those started after it)."""
    pending: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        call_id = str((event["payload"] or {}).get("call_id"))
        pending.setdefault(call_id, []).append(event)
        while pending:
            first = next(iter(pending))
            if not any(e["kind"] == RunEvent.Kind.MODEL_FINISHED for e in pending[first]):
                break
            yield from messages_of(pending.pop(first))
    for joined in pending.values():
        yield from messages_of(joined)


def _dumps(value: Any) -> str:
    """``value`` as DRF's ``JSONRenderer`` writes it (compact, UTF-8, strict)."""
    text = json.dumps(value, cls=JSONEncoder, ensure_ascii=False, allow_nan=False,
                      separators=(",", ":"))
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _array(items: Iterable[Any]) -> Iterator[str]:
    yield "["
    for index, item in enumerate(items):
        yield ("," if index else "") + _dumps(item)
    yield "]"


def run_export_json(*, run: Run) -> Iterator[bytes]:
    """The document :func:`run_export` gives, as the bytes DRF would render it, a piece
    at a time (each event, model call and checkpoint is one piece)."""
    def pieces() -> Iterator[str]:
        yield (f'{{"planwatch_export":{EXPORT_VERSION},"header":{_dumps(_header(run))},'
               f'"inputs":{_dumps(_inputs(run))},"events":')
        yield from _array(_events(run))
        yield ',"model_calls":'
        yield from _array(_model_calls(_events(run, MODEL_KINDS)))
        yield f',"interrupts":{_dumps(_interrupts(run))},"result":{_dumps(_result(run))},'
        yield '"checkpoints":'
        yield from _array(_checkpoint(e) for e in _events(run, [RunEvent.Kind.CHECKPOINT]))
        yield "}"

    buffer: list[str] = []
    size = 0
    for piece in pieces():  # pieces joined up to ~64 KB: fewer, larger writes
        buffer.append(piece)
        size += len(piece)
        if size >= 65536:
            yield "".join(buffer).encode()
            buffer, size = [], 0
    yield "".join(buffer).encode()


async def arun_export_json(*, run: Run) -> AsyncIterator[bytes]:
    """:func:`run_export_json` for an ASGI server, each piece read off the event loop in
    Django's one sync thread (its cursor stays on one connection); Django would read a
    sync iterator whole into memory before sending it."""
    pieces = run_export_json(run=run)
    read = sync_to_async(lambda: next(pieces, None))
    while (piece := await read()) is not None:
        yield piece
