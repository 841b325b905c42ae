"""Interrupt pages: a run's question forms with their audit trail, and the inbox."""

from __future__ import annotations

from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.views.decorators.http import require_http_methods

from dashboard import selectors, services
from dashboard.models import Interrupt, Run
from dashboard.web.forms.interrupts import InterruptAnswerForm
from dashboard.web.htmx import HtmxHttpRequest
from dashboard.web.presentation.inbox import (
    ANSWER_PERMISSION,
    FRAGMENT,
    inbox_context,
    run_interrupts_context,
    run_url,
)
from planner.registry import all_graphs


@require_http_methods(["GET", "POST"])
def run_interrupts(request: HtmxHttpRequest, run_id: UUID) -> HttpResponse:
    """GET: the run's question forms and audit trail; POST: answer one or all of them."""
    try:
        run = selectors.run_get(run_id=run_id)
    except Run.DoesNotExist:
        raise Http404(f"no run {run_id}; it may have been deleted") from None
    if not selectors.run_can_view(user=request.user, run=run):
        raise Http404(f"no run {run_id}; it may have been deleted")
    if request.method == "POST":
        return _answer(request, run)
    return TemplateResponse(request, FRAGMENT,
                            run_interrupts_context(run=run, user=request.user))


def _answer(request: HtmxHttpRequest, run: Run) -> HttpResponse:
    try:
        data = request.POST
    except RequestDataTooBig:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return _reply(request, run, status=413, message=(
            f"The answer is larger than the {limit // 1024:,} KB a form may send; nothing "
            f"was saved. Answers may be up to {services.MAX_ANSWER_BYTES // 1024} KB."))
    if not request.user.has_perm(ANSWER_PERMISSION):
        return _reply(request, run, status=403, message=(
            f"You may view these questions, but answering needs the permission "
            f"{ANSWER_PERMISSION!r}; ask an administrator to grant it."))
    by_pk = {str(i.pk): i for i in selectors.interrupts_of_run(run_id=run.id)}
    target = data.get("submit") or "all"
    if target == "all":
        chosen = [i for i in by_pk.values() if i.status == Interrupt.Status.PENDING]
    elif target in by_pk:
        chosen = [by_pk[target]]
    else:
        return _reply(request, run, status=422, message=(
            f"run {run.id} has no question {target!r}; reload the page to see its questions"))
    if not chosen:
        return _reply(request, run, status=409, message=(
            f"run {run.id} is {run.status} and waits for no answer; nothing changed"))
    forms = {i.pk: InterruptAnswerForm(data, interrupt=i) for i in chosen}
    if not all([f.is_valid() for f in forms.values()]):
        return _reply(request, run, status=422, bound=forms,
                      message="Some answers need fixing; nothing was sent.", level="error")
    answers = {f.interrupt.interrupt_id: f.cleaned_data["answer"] for f in forms.values()}
    try:
        services.run_resume(run=run, answers=answers, user=request.user)
    except services.InterruptClosed as exc:
        return _reply(request, run, status=409, message=exc.message)
    except services.ServiceError as exc:
        return _reply(request, run, status=422, bound=forms, message=exc.message, level="error")
    n = len(answers)
    done = f"{n} answer{'s' if n > 1 else ''} recorded; the run resumes."
    if not request.htmx:
        messages.success(request, done)
        return HttpResponseRedirect(run_url(run))
    return _reply(request, run, status=200, message=done, level="success")


def _reply(request: HtmxHttpRequest, run: Run, *, status: int, message: str, level: str = "error",
           bound: dict[int, InterruptAnswerForm] | None = None) -> HttpResponse:
    run.refresh_from_db()
    context = run_interrupts_context(run=run, user=request.user, bound=bound, message=message,
                                     level=level)
    if request.htmx:
        return TemplateResponse(request, FRAGMENT, context, status=status)
    section = render_to_string(FRAGMENT, context, request=request)
    return TemplateResponse(request, "dashboard/inbox.html", {
        "nav": "inbox", "sections": [(run, section, run_url(run))], "rows": [], "single": run,
        "graphs": all_graphs(), "graph": "",
    }, status=status)


def inbox(request: HtmxHttpRequest) -> TemplateResponse:
    """Every pending interrupt across runs (filterable by graph), answerable in place."""
    graph = request.GET.get("graph", "")
    return TemplateResponse(request, "dashboard/inbox.html",
                            inbox_context(user=request.user, graph=graph, request=request))
