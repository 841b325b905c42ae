"""What the question fragment and the inbox render; shared by the views and the consumer."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from django.core.paginator import Paginator
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils.safestring import SafeString, mark_safe

from dashboard import selectors, services
from dashboard.models import Interrupt, Run
from dashboard.web.forms.inbox import PAGE_SIZE
from dashboard.web.forms.interrupts import InterruptAnswerForm, question_summary
from planner.registry import all_graphs

ANSWER_PERMISSION = "dashboard.answer_interrupt"
FRAGMENT = "dashboard/_run_interrupts.html"

PendingState = dict[str, frozenset[int]]
"""Run id → primary keys of its pending interrupts: what an inbox page shows."""


def run_url(run: Run) -> str:
    """The run's page, or the runs list where no run page is installed."""
    try:
        return reverse("dashboard:run_detail", args=[run.id])
    except NoReverseMatch:
        return reverse("dashboard:runs")


def run_interrupts_context(
    *, run: Run, user: Any, bound: dict[int, InterruptAnswerForm] | None = None,
    message: str = "", level: str = "info",
) -> dict[str, Any]:
    """What ``_run_interrupts.html`` renders: pending forms, then the audit trail."""
    interrupts = list(selectors.interrupts_of_run(run_id=run.id))
    for i in interrupts:
        i.summary = question_summary(i.payload)  # type: ignore[attr-defined]  # for the template
    bound = bound or {}
    forms = [bound.get(i.pk) or InterruptAnswerForm(interrupt=i)
             for i in interrupts if i.status == Interrupt.Status.PENDING]
    can_assign = bool(user.has_perm(services.ASSIGN_PERMISSION))
    for form in forms:
        i = form.interrupt
        i.groups = i.group_names  # type: ignore[attr-defined]  # for the template
        i.not_yours = services.interrupt_may_answer(  # type: ignore[attr-defined]
            interrupt=i, user=user)
        if can_assign:
            i.candidates = selectors.interrupt_answerers(  # type: ignore[attr-defined]
                interrupt=i)
    closed = [i for i in interrupts if i.status != Interrupt.Status.PENDING]
    return {
        "answer_key": uuid4().hex,  # this render's answers, applied once however often sent
        # how far the run's questions had come when rendered (its newest question, how many
        # were closed): a page keeps a newer render over one that comes back later
        "version": f"{max((i.pk for i in interrupts), default=0)}.{len(closed)}",
        "run": run, "forms": forms,
        "answerable": any(not form.interrupt.not_yours  # type: ignore[attr-defined]
                          for form in forms),
        "closed": closed,
        "can_answer": bool(user.has_perm(ANSWER_PERMISSION)), "can_assign": can_assign,
        "viewer": user,
        # paused with no question: at its budget (what it asks), or at a breakpoint ("")
        "paused_budget": selectors.run_paused_at_budget(run=run) if not forms else "",
        "permission": ANSWER_PERMISSION, "message": message, "level": level,
    }


def render_run_interrupts(*, run: Run, user: Any, request: Any = None) -> SafeString:
    """The question fragment of one run as HTML."""
    return render_to_string(FRAGMENT, run_interrupts_context(run=run, user=user),
                            request=request)


def _section(run: Run, user: Any, request: Any) -> tuple[Run, SafeString, str]:
    return run, render_run_interrupts(run=run, user=user, request=request), run_url(run)


OPEN_FORMS_UP_TO = 5
"""An inbox of at most this many questions shows their forms open below the list (an
operator with a few runs answers at once); past it, each question is one compact row that
opens its form in place, grouped by question, with answer-many per group."""


def _rows(filters: dict[str, Any], user: Any) -> list[Interrupt]:
    rows = list(selectors.interrupts_inbox(**filters, user=user))
    for row in rows:
        row.summary = question_summary(row.payload)  # type: ignore[attr-defined]  # template
    return rows


@dataclass
class QuestionGroup:
    """One question asked by several runs of a graph, as a page of the inbox lists it."""

    graph: str
    key: str
    rows: list[Interrupt]
    form: InterruptAnswerForm
    """The question's form (its first run's), rendered once for answering the selected."""

    @property
    def prefix(self) -> str:
        """The names of the group's answer-many form."""
        return str(self.form.prefix)


def _groups(rows: list[Interrupt]) -> list[QuestionGroup]:
    groups: list[QuestionGroup] = []
    for row in rows:
        key = getattr(row, "question_key", "")
        if not groups or (groups[-1].graph, groups[-1].key) != (row.run.graph, key):
            form = InterruptAnswerForm(interrupt=row, prefix=f"g{row.pk}")
            # one run's suggestion (the currency its goal names) is not every run's answer
            form.fields["answer"].initial = None
            groups.append(QuestionGroup(row.run.graph, key, [], form))
        groups[-1].rows.append(row)
    return groups


def inbox_context(*, user: Any, filters: dict[str, Any] | None = None, page: int = 1,
                  request: Any = None) -> dict[str, Any]:
    """The inbox page: one page of the waiting questions (paged in SQL), grouped by
    question; their forms open below when there are few (:data:`OPEN_FORMS_UP_TO`)."""
    filters = filters or {"graph": ""}
    paginator = Paginator(selectors.interrupts_inbox(**filters, user=user), PAGE_SIZE)
    shown = paginator.get_page(page)
    rows = list(shown.object_list)
    for row in rows:
        row.summary = question_summary(row.payload)  # type: ignore[attr-defined]  # template
    compact = paginator.count > OPEN_FORMS_UP_TO
    runs: dict[UUID, Run] = {}
    if not compact:
        for row in rows:
            runs.setdefault(row.run_id, row.run)
    return {"nav": "inbox", "rows": rows, "graph": filters.get("graph", ""),
            "graphs": all_graphs(),
            "filters": filters, "page": shown, "compact": compact,
            "groups": _groups(rows) if compact else [],
            "questions": selectors.interrupts_questions(
                user=user, graph=filters.get("graph", "")),
            "sections": [_section(run, user, request) for run in runs.values()],
            "at_budget": selectors.runs_at_budget(user=user),
            "can_budget": bool(user.has_perm("dashboard.cancel_run")),
            "can_answer": bool(user.has_perm(ANSWER_PERMISSION)), "single": None}


def inbox_counts(*, user: Any, filters: dict[str, Any], prefix: str, graph: str,
                 question: str) -> SafeString:
    """Out-of-band swaps of a compact inbox page's counts as they stand now: the questions
    waiting under its ``filters``, and those of the group ``prefix`` (``graph``'s
    ``question``)."""
    asked = selectors.interrupts_inbox(**filters, user=user)
    group = (selectors.interrupts_inbox(**{**filters, "graph": graph, "question": question},
                                        user=user).count() if graph and question else None)
    return render_to_string("dashboard/_inbox_counts.html", {
        "total": asked.count(), "prefix": prefix, "group": group})


def inbox_update(*, user: Any, graph: str = "", known: PendingState | None,
                 filters: dict[str, Any] | None = None, compact: bool = False,
                 shown: frozenset[int] = frozenset(), since: datetime | None = None,
                 ) -> tuple[SafeString, PendingState]:
    """Out-of-band swaps that bring an inbox page from ``known`` to now, and the new state.

    Only runs whose pending questions changed are re-rendered, so an answer being typed
    into another run's form survives; ``known=None`` (a page just loaded) sends the rows only.
    A run whose questions were all answered keeps its place, saying so (its state keeps it
    with no question, so a new question of that run comes back in the same place).
    A ``compact`` page (its rows open forms in place, and may be selected) is never
    re-rendered under the operator: it is told which of the questions it ``shown`` closed
    and how many were asked ``since`` it was rendered, with a link that lists them anew.
    """
    filters = filters or {"graph": graph}
    if compact:
        return _stale_note(filters, shown, since, user), {}
    rows = _rows(filters, user)
    state: dict[str, set[int]] = {}
    runs: dict[str, Run] = {}
    for row in rows:
        state.setdefault(str(row.run_id), set()).add(row.pk)
        runs[str(row.run_id)] = row.run
    now = {rid: frozenset(pks) for rid, pks in state.items()}
    parts: list[str] = [render_to_string("dashboard/_inbox_rows.html",
                              {"rows": rows, "graph": filters.get("graph", ""), "oob": True})]

    def article(rid: str, oob: str = "") -> str:
        run, section, url = _section(runs[rid], user, None)
        return render_to_string("dashboard/_inbox_run.html",
                                {"run": run, "section": section, "run_url": url, "oob": oob})

    if known is None:  # the page was rendered just now: keep what is being typed into it
        return mark_safe("".join(parts)), now  # rendered, escaped templates
    for rid, pks in known.items():
        if rid not in now:
            if pks:  # its questions were just closed: say how, in their place
                parts.append(_closed_article(rid))
            now[rid] = frozenset()
    for rid, pks in now.items():
        if rid not in known:
            parts.append(f'<div hx-swap-oob="beforeend:#inbox-runs">{article(rid)}</div>')
        elif known[rid] != pks and pks:
            parts.append(article(rid, oob="true"))
    return mark_safe("".join(parts)), now  # rendered, escaped templates


def _stale_note(filters: dict[str, Any], shown: frozenset[int], since: datetime | None,
                user: Any) -> SafeString:
    """What a compact page says of the questions it listed (``shown``) that closed since,
    and of those asked ``since`` it was rendered (nothing when nothing changed)."""
    still = set(Interrupt.objects.filter(pk__in=shown, status=Interrupt.Status.PENDING)
                .values_list("pk", flat=True))
    closed = len(shown - still)
    asked = selectors.interrupts_inbox(**filters, user=user)
    new = asked.filter(created_at__gt=since).count() if since else 0
    return render_to_string("dashboard/_inbox_stale.html",
                            {"closed": closed, "new": new, "oob": True})


def closed_note(*, run: Run) -> str:
    """What a run's place in the inbox says once none of its questions waits any more."""
    last = (selectors.interrupts_of_run(run_id=run.id).exclude(status=Interrupt.Status.PENDING)
            .order_by("-created_at", "-id").first())
    if last is None or last.status != Interrupt.Status.ANSWERED:
        return "No question waits any more: the run was cancelled or moved on."
    by = f" by {last.answerer_name}" if last.answerer_name else ""
    return f"Answered{by} — the run continues."


def _closed_article(rid: str) -> str:
    run = Run.objects.filter(id=rid).first()
    if run is None:  # deleted: nothing to keep a place for
        return f'<article id="inbox-run-{rid}" hx-swap-oob="delete"></article>'
    return render_to_string("dashboard/_inbox_run.html", {
        "run": run, "closed": closed_note(run=run), "run_url": run_url(run), "oob": "true"})


def badge(*, count: int) -> SafeString:
    """The navigation's pending-question count as an out-of-band swap."""
    return render_to_string("dashboard/_inbox_badge.html", {"count": count, "oob": True})


def browser_notices(*, user: Any, after: int) -> tuple[SafeString, int]:
    """The questions asked since the one numbered ``after`` that ``user`` may answer, as
    an out-of-band append to the page's notice list (``notify.js`` shows each as a browser
    notification, once the operator opted in), and the newest number seen."""
    asked = selectors.interrupts_asked_since(user=user, after=after)
    if not asked:
        return SafeString(""), after
    items = [{"pk": i.pk, "graph": i.run.graph,
              "text": question_summary(i.payload)["text"][:300],
              "url": run_url(i.run) + f"#interrupt-{i.pk}"} for i in asked]
    html = render_to_string("dashboard/_browser_notices.html", {"asked": items})
    return html, max(i.pk for i in asked)
