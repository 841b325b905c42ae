"""The trace view of one run: live page, replay, event details, state inspector, cancel."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote
from uuid import UUID

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboard import selectors, services
from dashboard.checkpoints import checkpoint_get, values_diff
from dashboard.models import Run, RunEvent
from dashboard.web.forms.timeline import TimelineFilterForm
from dashboard.web.htmx import HtmxHttpRequest
from dashboard.web.presentation import header, results, timeline, trace, trace_calls
from dashboard.web.presentation.inbox import render_run_interrupts
from dashboard.web.views.common import run_or_404
from dashboard.web.views.debug import debug_context

_WITH_TRACEBACK = (RunEvent.Kind.RUN_FAILED, RunEvent.Kind.NODE_FAILED)


def run_detail(request: HtmxHttpRequest, run_id: UUID) -> TemplateResponse:
    """The trace view; with ``?at=<seq>`` a finished run is replayed up to that event."""
    run = run_or_404(request, run_id)
    upto: int | None = None
    if "at" in request.GET:
        upto = _replay_position(request.GET["at"], last_seq=run.last_seq)
        if upto is None:
            return TemplateResponse(request, "dashboard/run_bad_at.html", {
                "run": run, "bad_at": _printable(request.GET["at"]),
            }, status=400)
    point = trace.replay_point(run=run, upto=upto) if upto is not None else None
    fold, events = (point.fold, point.events) if point else trace.trace_fold(run=run)
    if upto is None:
        # read after the events: the header is never older than the log the page shows
        run = selectors.run_get(run_id=run.id)
    context = trace.panels_context(run=run, fold=fold)
    context.update(events=events, replay=upto is not None, at=upto,
                   can_cancel=request.user.has_perm("dashboard.cancel_run")
                   and not run.is_finished)
    context.update(_timeline_context(request, run, fold))
    if point is None:
        now_figures = fold.waterfall.figures.at(timezone.now())
        context.update(head=header.run_head(run, figures=now_figures),
                       result=results.run_result(run=run, tasks=fold.tasks),
                       budget=selectors.run_budget(run=run, figures=now_figures),
                       can_budget=request.user.has_perm("dashboard.cancel_run"))
        context.update(debug_context(request=request, run=run))
        # the questions come with the page, so they can be answered without JavaScript
        context["interrupts_html"] = render_run_interrupts(run=run, user=request.user,
                                                           request=request)
    else:
        head = header.replay_head(events, current=fold.current, run=run)
        context.update(head=head, point=point, prev_at=max(point.at - 1, 1),
                       next_at=min(point.at + 1, run.last_seq),
                       state=trace.state_at(run=run, events=events),
                       answers=timeline.answers_upto(events),
                       result=results.run_result(run=run, tasks=fold.tasks)
                       if point.at == run.last_seq else None)
    return TemplateResponse(request, "dashboard/run_detail.html", context)


def _timeline_context(request: HtmxHttpRequest, run: Run, fold: trace.TraceFold
                      ) -> dict[str, Any]:
    """The timeline's rows as the page's filters (``?node``, ``?kind``, ``?bookkeeping``)
    choose them, and the filter form."""
    rows = list(fold.timeline.rows.values())
    topology = trace.graph_topology_or_none(run.graph)
    nodes = [n for n in (topology.nodes if topology else ()) if n not in (trace.START, trace.END)]
    nodes += [n for n in timeline.row_nodes(rows) if n not in nodes]
    form = TimelineFilterForm(request.GET, nodes=nodes)
    chosen = form.filters()
    return {
        "rows": timeline.rows_filter(rows, node=chosen["node"], kind=chosen["kind"]),
        "timeline_form": form, "timeline_filter": chosen,
        "filtered": bool(chosen["node"] or chosen["kind"]),
        # a kind asked for by name shows its rows, bookkeeping or not
        "hide_bookkeeping": not (chosen["bookkeeping"] or chosen["kind"]),
        # replay's links keep the filters
        "filter_qs": "".join(f"&{k}={quote(str(v) if v is not True else '1')}"
                             for k, v in chosen.items() if v),
    }


def _printable(text: str) -> str:
    """``text`` with control characters (a NUL …) shown as ``\\x00`` escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _replay_position(text: str, *, last_seq: int) -> int | None:
    """``?at=`` as an event number from 1 to ``last_seq``, or None when it is not one."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 12:
        return None
    at = int(text)
    return at if 1 <= at <= last_seq else None


def run_event(request: HtmxHttpRequest, run_id: UUID, seq: int) -> TemplateResponse:
    """A timeline row expanded: the state update, and the diff against the checkpoint before."""
    run = run_or_404(request, run_id)
    try:
        detail = trace.event_detail(run_id=run.id, seq=seq)
    except RunEvent.DoesNotExist:
        raise Http404(f"run {run_id} has no event {seq}") from None
    if detail["event"].kind in trace_calls.MODEL_KINDS:  # a model call: its conversation
        return TemplateResponse(request, "dashboard/_model_call.html", {
            "run": run, "call": trace_calls.model_call_of(run_id=run.id, event=detail["event"]),
        })
    checkpoint = detail["checkpoint"]
    diff = None
    if checkpoint is not None:
        after = checkpoint_get(thread_id=run.thread_id, checkpoint_id=checkpoint.checkpoint_id,
                               checkpoint_ns=checkpoint.namespace)
        parent = (after.parent_id if after else None)
        before = checkpoint_get(thread_id=run.thread_id, checkpoint_id=parent,
                                checkpoint_ns=checkpoint.namespace) if parent else None
        if after is not None:
            diff = [
                {**c, "before_json": trace.pretty(c.get("before", "")),
                 "after_json": trace.pretty(c.get("after", ""))}
                for c in values_diff(before.values if before else {}, after.values)
            ]
    event = detail["event"]
    error = event.payload.get("error", "") if isinstance(event.payload, dict) else ""
    traceback = run.error_traceback if event.kind in _WITH_TRACEBACK else ""
    return TemplateResponse(request, "dashboard/_trace_event_detail.html", {
        "run": run, "event": event, "checkpoint": checkpoint, "diff": diff,
        "payload_json": trace.pretty(event.payload), "error": error, "traceback": traceback,
        "model_calls": trace_calls.node_model_calls(run_id=run.id, event=event),
    })


def run_task(request: HtmxHttpRequest, run_id: UUID, task_id: str) -> TemplateResponse:
    """One task of the DAG in full: goal, type, status, output or error, worker, attempts."""
    run = run_or_404(request, run_id)
    upto = _replay_position(request.GET.get("at", ""), last_seq=run.last_seq) \
        if "at" in request.GET else None
    fold, _ = trace.trace_fold(run=run, upto=upto)
    if task_id not in fold.tasks:
        raise Http404(f"run {run_id} has no task {task_id!r}")
    task = fold.tasks[task_id]
    output = task.get("result")
    return TemplateResponse(request, "dashboard/_trace_task_detail.html", {
        "run": run, "task": trace.task_card(fold, task_id),
        "output_json": trace.pretty(output) if output is not None else "",
        "deps": [trace.task_card(fold, d) for d in task.get("deps") or ()
                 if d in fold.tasks],
        "waiting": [trace.task_card(fold, t) for t, other in fold.tasks.items()
                    if task_id in (other.get("deps") or ())],
    })


def run_state(request: HtmxHttpRequest, run_id: UUID) -> TemplateResponse | HttpResponse:
    """The state inspector: the full state at one checkpoint of the run."""
    run = run_or_404(request, run_id)
    checkpoint_id = request.GET.get("checkpoint", "")
    if not checkpoint_id:
        return HttpResponseBadRequest("pass ?checkpoint=<checkpoint id> from the timeline")
    event = selectors.run_events(run_id=run.id).filter(
        kind=RunEvent.Kind.CHECKPOINT, checkpoint_id=checkpoint_id
    ).first()
    if event is None:
        raise Http404(f"run {run_id} has no checkpoint {checkpoint_id!r}")
    view = checkpoint_get(thread_id=run.thread_id, checkpoint_id=checkpoint_id,
                          checkpoint_ns=event.namespace)
    return TemplateResponse(request, "dashboard/_trace_state.html",
                            {"run": run, "event": event, "checkpoint": view,
                             "values_json": trace.pretty(view.values) if view else ""})


@require_POST
def run_budget(request: HtmxHttpRequest, run_id: UUID) -> HttpResponse:
    """Answer a run paused at its budget: extend it by the amount given (it goes on), or
    stop it (needs the cancel permission)."""
    run = run_or_404(request, run_id)
    if reason := services.run_budget_may_answer(user=request.user):
        raise PermissionDenied(reason)
    try:
        if request.POST.get("action") == "stop":
            services.run_budget_stop(run=run, user=request.user)
            messages.success(request, "Run stopped at its budget.")
        else:
            services.run_budget_extend(run=run, user=request.user, extend={
                request.POST.get("kind", ""): request.POST.get("extend", "")})
            messages.success(request, "Budget extended; the run goes on.")
    except services.ServiceError as exc:
        messages.error(request, exc.message)
    if request.POST.get("back") == "inbox":
        return redirect("dashboard:inbox")
    return redirect("dashboard:run_detail", run_id=run.id)


@require_POST
def run_cancel(request: HtmxHttpRequest, run_id: UUID) -> HttpResponse:
    """Cancel the run (needs the cancel permission), then show the trace again."""
    run = run_or_404(request, run_id)
    if not request.user.has_perm("dashboard.cancel_run"):
        raise PermissionDenied("you need the 'Can cancel runs' permission to cancel a run")
    try:
        run = services.run_cancel(run=run, user=request.user)
    except services.ServiceError as exc:
        level, text = "error", exc.message
    else:  # a run nobody executes is cancelled at once; a running one at its next node
        level, text = "success", ("Run cancelled." if run.is_finished else
                                  "Cancel requested; the run stops at its next node.")
    if request.htmx:  # the page stays (its socket brings the new status): only say it here
        return TemplateResponse(request, "dashboard/_trace_notice.html",
                                {"level": level, "text": text})
    getattr(messages, level)(request, text)
    return redirect("dashboard:run_detail", run_id=run.id)

