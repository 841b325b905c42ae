"""OpenTelemetry export: each run as one trace (run → node → model-call spans) over OTLP/HTTP.

With ``PLANWATCH_OTLP_ENDPOINT`` set, every time an executor stops executing a run (it
ended, paused for a question or a breakpoint, or was cancelled) the events of that
execution are turned into spans, with the times they were recorded, on a thread of this
module's own, and handed to the official SDK's ``BatchSpanProcessor``, which sends them
in the background (and retries): the run is never delayed or failed by it.

The trace id is the run's id, so every execution of a run (its start, each resume) lands
in the same trace, each as a ``run`` span with its node spans and their model calls.
Attributes follow OpenTelemetry's GenAI semantic conventions (``gen_ai.*``) and
OpenInference's (``openinference.span.kind``, ``llm.token_count.*``, ``input.value``,
``output.value``), so Phoenix, Langfuse, Jaeger and Tempo all read them.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import logging
import threading
import uuid
from datetime import datetime
from typing import Any

from django.db import connection
from django.utils import timezone

from dashboard.models import Run, RunEvent
from dashboard.runs.conf import planwatch_setting
from dashboard.runs.figures import figures_of
from dashboard.runs.modelcalls import messages_of
from dashboard.runs.outcome import meaning as outcome_meaning
from dashboard.runs.record import event_dict

logger = logging.getLogger("planwatch.otel")
Kind = RunEvent.Kind
NODE_ENDS = (Kind.NODE_FINISHED, Kind.NODE_FAILED, Kind.INTERRUPT_RAISED)

_lock = threading.Lock()
_state: dict[str, Any] = {}  # endpoint -> (provider, tracer), the worker thread


def traces_url(endpoint: str) -> str:
    """``PLANWATCH_OTLP_ENDPOINT`` as the traces URL (``/v1/traces`` added to a base URL)."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else f"{endpoint}/v1/traces"


class _Ids:
    """Trace and span ids of a run's spans: the run's id, and ids derived from the events."""

    def __init__(self) -> None:
        self.local = threading.local()

    def generate_trace_id(self) -> int:
        return int(self.local.trace_id)

    def generate_span_id(self) -> int:
        return int(self.local.span_ids.pop(0))

    def is_trace_id_random(self) -> bool:
        return False


def _tracer() -> tuple[Any, Any, _Ids] | None:
    """The SDK's provider, tracer and ids for the configured endpoint (None: not set)."""
    endpoint = planwatch_setting("OTLP_ENDPOINT")
    if not endpoint:
        return None
    with _lock:
        if endpoint not in _state:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            ids = _Ids()
            provider = TracerProvider(
                resource=Resource.create({"service.name": "planwatch"}),
                id_generator=ids)  # type: ignore[arg-type]
            provider.add_span_processor(BatchSpanProcessor(
                OTLPSpanExporter(endpoint=traces_url(endpoint), timeout=10)))
            _state[endpoint] = (provider, provider.get_tracer("planwatch"), ids)
        return _state[endpoint]  # type: ignore[no-any-return]


_worker: concurrent.futures.ThreadPoolExecutor | None = None


def export_soon(run_id: uuid.UUID, *, after: int, upto: int) -> None:
    """Export the events ``after`` < seq <= ``upto`` of a run as spans, in the background."""
    global _worker
    if not planwatch_setting("OTLP_ENDPOINT") or upto <= after:
        return
    with _lock:
        if _worker is None:
            _worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="otel")
    _worker.submit(_export_logged, run_id, after, upto)


def _export_logged(run_id: uuid.UUID, after: int, upto: int) -> None:
    """Export on this module's thread, its connection back to the pool after each export:
    the thread lives as long as the process, and a connection left open on it held one of
    the pool's connections for good (the test process's 4 ran out: PoolTimeout)."""
    try:
        export_run(run_id, after=after, upto=upto)
    except Exception:
        logger.warning("exporting run %s to OpenTelemetry failed", run_id, exc_info=True)
    finally:
        connection.close()


def flush(timeout_s: float = 10) -> bool:
    """Wait for the spans built so far to be sent (tests, shutdown)."""
    if _worker is not None:
        _worker.submit(lambda: None).result(timeout_s)
    return all(provider.force_flush(int(timeout_s * 1000)) for provider, _, _ in
               _state.values())


def _ns(moment: str | datetime | None) -> int | None:
    if moment is None:
        return None
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    return int(moment.timestamp() * 1e9)


def _span_id(run_id: uuid.UUID, key: str) -> int:
    """A stable, non-zero 64-bit span id for ``key`` within the run."""
    digest = hashlib.blake2b(f"{run_id}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") or 1


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def export_run(run_id: uuid.UUID, *, after: int, upto: int) -> None:
    """Build the spans of one execution of a run (events ``after`` < seq <= ``upto``)."""
    found = _tracer()
    if found is None:
        return
    _, tracer, ids = found
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    run = Run.objects.get(id=run_id)
    events = [event_dict(e) for e in RunEvent.objects.filter(
        run_id=run_id, seq__gt=after, seq__lte=upto).order_by("seq")]
    if not events:
        return
    keep = planwatch_setting("TRACE_CONTENT")
    ids.local.trace_id = run.id.int

    def start(name: str, key: str, parent: Any, begin: Any, attributes: dict[str, Any]) -> Any:
        ids.local.span_ids = [_span_id(run.id, key)]
        context = trace.set_span_in_context(parent) if parent is not None else None
        return tracer.start_span(name, context=context, start_time=_ns(begin),
                                 attributes={k: v for k, v in attributes.items()
                                             if v is not None})

    first, last = events[0], events[-1]
    # when things happened (an answer given before the run resumed included), not when the
    # rows were written
    began, finished = min(e["at"] for e in events), max(e["at"] for e in events)
    root = start(f"{run.graph} run", f"run:{first['seq']}", None, began, {
        "openinference.span.kind": "CHAIN", "planwatch.run_id": str(run.id),
        "planwatch.graph": run.graph, "planwatch.status": run.status,
        "planwatch.seq.first": first["seq"], "planwatch.seq.last": last["seq"],
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": run.graph,
        "input.value": _json(run.input) if keep and after == 0 else None,
        "input.mime_type": "application/json",
        "output.value": _json(run.output) if keep and run.output is not None else None,
        "llm.token_count.prompt": run.input_tokens,
        "llm.token_count.completion": run.output_tokens,
        "llm.token_count.total": run.total_tokens,
        **{f"planwatch.{name}": value for name, value in figures_of(
            RunEvent.objects.filter(run_id=run_id, seq__lte=upto).order_by("seq").values(
                "seq", "kind", "payload", "at", "created_at"),
            now=timezone.now()).as_dict().items()}})
    nodes: dict[str, Any] = {}  # task id -> its span
    for event in events:
        if event["kind"] == Kind.NODE_STARTED:
            outer = event["namespace"].split("|")[-1].rpartition(":")[2]
            nodes[event["task_id"]] = start(event["node"], f"task:{event['task_id']}",
                                            nodes.get(outer, root), event["at"], {
                "openinference.span.kind": "CHAIN", "planwatch.node": event["node"],
                "planwatch.task_id": event["task_id"], "planwatch.step": event["step"],
                "planwatch.namespace": event["namespace"] or None})
    for call in messages_of(events):
        parent = nodes.get(call["task_id"], root)
        usage = call.get("usage") or {}
        operation = "chat" if call.get("kind") == "chat" else "text_completion"
        latency = call.get("latency_ms")
        end = _ns(call["finished_at"])
        begin = end - int(latency * 1e6) if end and latency else _ns(call["started_at"])
        output = call.get("output") or {}
        ids.local.span_ids = [_span_id(run.id, f"call:{call.get('call_id')}")]
        span = tracer.start_span(
            f"{operation} {call.get('model') or 'model'}",
            context=trace.set_span_in_context(parent), start_time=begin,
            attributes={k: v for k, v in {
                "openinference.span.kind": "LLM", "gen_ai.operation.name": operation,
                "gen_ai.provider.name": call.get("provider"),
                "gen_ai.system": call.get("provider"),
                "gen_ai.request.model": call.get("model"),
                "gen_ai.response.model": call.get("model"),
                "gen_ai.usage.input_tokens": usage.get("input_tokens"),
                "gen_ai.usage.output_tokens": usage.get("output_tokens"),
                "llm.model_name": call.get("model"), "llm.provider": call.get("provider"),
                "llm.token_count.prompt": usage.get("input_tokens"),
                "llm.token_count.completion": usage.get("output_tokens"),
                "llm.token_count.total": usage.get("total_tokens"),
                "llm.token_count.prompt_details.cache_read": usage.get("cached_tokens"),
                "llm.cost.total": (call.get("cost") or {}).get("total"),
                "planwatch.purpose": call.get("purpose"),
                "planwatch.ttft_ms": call.get("ttft_ms"),
                "input.value": _json(call.get("messages")) if keep else None,
                "input.mime_type": "application/json",
                "output.value": output.get("text") if keep else None,
                **({f"llm.input_messages.{i}.message.role": m["role"]
                    for i, m in enumerate(call.get("messages") or [])} if keep else {}),
                **({f"llm.input_messages.{i}.message.content": m["content"]
                    for i, m in enumerate(call.get("messages") or [])} if keep else {}),
            }.items() if v is not None})
        if call.get("error"):
            span.set_status(Status(StatusCode.ERROR, call["error"]))
        span.end(end_time=end)
    ended: dict[str, dict[str, Any]] = {e["task_id"]: e for e in events
                                        if e["kind"] in NODE_ENDS}
    for task_id, span in reversed(list(nodes.items())):
        done = ended.get(task_id)
        if done is not None and done["kind"] == Kind.NODE_FAILED:
            span.set_status(Status(StatusCode.ERROR, str(done["payload"].get("error"))))
        if done is not None and done["kind"] == Kind.INTERRUPT_RAISED:
            span.set_attribute("planwatch.interrupt", _json(done["payload"].get("value")))
        span.end(end_time=_ns(done["at"] if done is not None else finished))
    if run.outcome:
        root.set_attribute("planwatch.outcome", run.outcome)
        if outcome_meaning(run.outcome).failure:
            # a failed plan too (its graph returned; as Langfuse and LangSmith raise a trace
            # whose child failed): ERROR, with the stored reason
            said = run.outcome_reason if run.outcome == Run.Outcome.FAILED else (
                f"{Run.Outcome(run.outcome).label}: {run.outcome_reason}")
            root.set_status(Status(StatusCode.ERROR, said))
    elif run.error_message:
        root.set_status(Status(StatusCode.ERROR, run.error_message))
    root.end(end_time=_ns(finished))
