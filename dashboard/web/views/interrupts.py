"""Interrupt pages: a run's question forms with their audit trail, and the inbox."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpResponse, HttpResponseRedirect, QueryDict
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from dashboard import policy, selectors, services
from dashboard.models import Interrupt, Run
from dashboard.web.forms.inbox import (
    AGE_CHOICES,
    FOR_CHOICES,
    SORT_CHOICES,
    BulkAnswer,
    InboxFilters,
)
from dashboard.web.forms.interrupts import InterruptAnswerForm
from dashboard.web.htmx import HtmxHttpRequest
from dashboard.web.presentation.inbox import (
    ANSWER_PERMISSION,
    FRAGMENT,
    inbox_context,
    inbox_counts,
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
    if not request.htmx:  # a link followed without JavaScript: the page of its questions
        return _reply(request, run, status=200, message="")
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
    key = data.get("answer_key", "")[:64]
    if target == "all":  # those waiting, and those this very post answered before
        chosen = [i for i in by_pk.values() if i.status == Interrupt.Status.PENDING
                  or (key and i.answer_key == key)]
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
        services.run_resume(run=run, answers=answers, user=request.user,
                            via=Interrupt.Channel.PAGE, key=key)
    except services.AnswerForbidden as exc:
        return _reply(request, run, status=403, message=exc.message)
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
        "graphs": all_graphs(), "graph": "", "filters": {},
    }, status=status)


@require_POST
def interrupt_take(request: HtmxHttpRequest, interrupt_pk: int) -> HttpResponse:
    """"I'm on it": the question is the user's; others see who has it."""
    interrupt, run = _question(interrupt_pk, request.user)
    if not request.user.has_perm(ANSWER_PERMISSION):
        return _reply(request, run, status=403, message=(
            f"Taking a question needs the permission {ANSWER_PERMISSION!r}."))
    try:
        services.interrupt_take(interrupt=interrupt, user=request.user)
    except services.AnswerForbidden as exc:
        return _reply(request, run, status=403, message=exc.message)
    except services.ServiceError as exc:
        return _reply(request, run, status=409, message=exc.message)
    return _reply(request, run, status=200, level="success",
                  message="You are on it; the others see that you have it.")


@require_POST
def interrupt_assign(request: HtmxHttpRequest, interrupt_pk: int) -> HttpResponse:
    """A lead gives the question to another operator (or to nobody)."""
    interrupt, run = _question(interrupt_pk, request.user)
    name = (request.POST.get(f"username-{interrupt_pk}") or request.POST.get("username")
            or "").strip()
    to = get_user_model().objects.filter(username=name[:150]).first() if name else None
    if name and to is None:
        return _reply(request, run, status=422, message=f"no user {name[:150]!r}; pick one "
                                                        "from the list")
    try:
        services.interrupt_assign(interrupt=interrupt, to=to, by=request.user)
    except services.AnswerForbidden as exc:
        return _reply(request, run, status=403, message=exc.message)
    except services.ServiceError as exc:
        return _reply(request, run, status=409 if isinstance(
            exc, services.InterruptClosed) else 422, message=exc.message)
    done = f"Given to {name}." if to else "Given back: nobody has it now."
    return _reply(request, run, status=200, level="success", message=done)


def _question(pk: int, user: Any) -> tuple[Interrupt, Run]:
    """The question and its run, if ``user`` may read the run (else 404, as for a run)."""
    interrupt = Interrupt.objects.select_related("run").filter(pk=pk).first()
    if interrupt is None or not selectors.run_can_view(user=user, run=interrupt.run):
        raise Http404(f"no question {pk}; it may have been deleted with its run")
    return interrupt, selectors.run_get(run_id=interrupt.run_id)


def inbox(request: HtmxHttpRequest) -> TemplateResponse:
    """The waiting questions across runs: searched, filtered, sorted and paged in SQL,
    grouped by question, each answerable in place (and many at once)."""
    return TemplateResponse(request, "dashboard/inbox.html", _inbox_page(request))


def _inbox_page(request: HtmxHttpRequest, **extra: Any) -> dict[str, Any]:
    form = InboxFilters(request.GET)
    form.is_valid()
    filters = form.filters()
    context = inbox_context(user=request.user, filters=filters, page=form.page_number(),
                            request=request)
    kept = {k: v for k, v in filters.items() if v and not (k == "sort" and v == "oldest")}
    shown = ",".join(str(r.pk) for r in context["rows"]) if context["compact"] else ""
    ws = {**kept, **({"compact": "1", "shown": shown,
                      "since": timezone.now().isoformat()} if context["compact"] else {})}
    problems = "; ".join(f"{name}: {' '.join(str(e) for e in errs)}"
                         for name, errs in form.errors.items())
    context.update(query=urlencode(kept), ws_query=urlencode(ws), age_choices=AGE_CHOICES,
                   sort_choices=SORT_CHOICES, for_choices=FOR_CHOICES, filter_errors=problems,
                   **extra)
    return context


@require_POST
def inbox_answer(request: HtmxHttpRequest) -> HttpResponse:
    """Answer the selected runs' question with one answer: each checked by its graph's
    rule (the question's form), each recorded exactly once; a result per run."""
    if not request.user.has_perm(ANSWER_PERMISSION):
        return HttpResponse(
            f"Answering needs the permission {ANSWER_PERMISSION!r}; ask an administrator "
            "to grant it.", status=403, content_type="text/plain; charset=utf-8")
    form = BulkAnswer(request.POST)
    prefix = request.POST.get("prefix", "")
    if not form.is_valid() or not re.fullmatch(r"g\d{1,19}", prefix):
        return _results(request, [], status=422, message=(
            "Select at least one run (the boxes in the first column), then answer."))
    text = request.POST.get(f"{prefix}-answer", "")
    # only the questions of runs the user may read: another's id is as unknown as a wrong one
    posted = form.cleaned_data["interrupt"]
    chosen = policy.interrupts_visible(request.user, Interrupt.objects.filter(
        pk__in=posted)).select_related("run")
    answers: list[tuple[Interrupt, Any]] = []
    refused: list[services.AnswerResult] = []
    for interrupt in chosen.order_by("created_at", "id"):
        one = InterruptAnswerForm({f"i{interrupt.pk}-answer": text}, interrupt=interrupt)
        if one.is_valid():
            answers.append((interrupt, one.cleaned_data["answer"]))
        else:
            reason = (" ".join(str(e) for e in one.errors.get("answer", []))
                      or "the answer was refused")
            refused.append(services.AnswerResult(interrupt, False, f"not sent: {reason}"))
    results = services.interrupts_answer_each(answers=answers, user=request.user) + refused
    unknown = len(set(posted)) - len(answers) - len(refused)
    if unknown:
        return _results(request, results, status=200 if results else 404, message=(
            f"{unknown} of the selected questions no longer exist{'s' if unknown == 1 else ''} "
            "or are not yours to see; reload the inbox for the questions waiting now."))
    return _results(request, results, status=200)


def _results(request: HtmxHttpRequest, results: list[services.AnswerResult], *, status: int,
             message: str = "") -> HttpResponse:
    context = {"results": results, "answered": sum(r.ok for r in results),
               "failed": sum(not r.ok for r in results), "message": message,
               "can_answer": True}
    if request.htmx:
        shown = InboxFilters(QueryDict(request.POST.get("filters", "")))
        shown.is_valid()
        counts = inbox_counts(user=request.user, filters=shown.filters(),
                              prefix=request.POST.get("prefix", ""),
                              graph=request.POST.get("graph", ""),
                              question=request.POST.get("question", ""))
        return TemplateResponse(request, "dashboard/_inbox_results.html",
                                {**context, "oob_rows": True, "counts": counts}, status=status)
    return TemplateResponse(request, "dashboard/inbox.html",
                            _inbox_page(request, **context), status=status)
