"""What the question fragment and the inbox render; shared by the views and the consumer."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils.safestring import SafeString, mark_safe

from dashboard import selectors
from dashboard.models import Interrupt, Run
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
    return {
        "run": run, "forms": forms,
        "closed": [i for i in interrupts if i.status != Interrupt.Status.PENDING],
        "can_answer": bool(user.has_perm(ANSWER_PERMISSION)),
        "permission": ANSWER_PERMISSION, "message": message, "level": level,
    }


def render_run_interrupts(*, run: Run, user: Any, request: Any = None) -> SafeString:
    """The question fragment of one run as HTML."""
    return render_to_string(FRAGMENT, run_interrupts_context(run=run, user=user),
                            request=request)


def _section(run: Run, user: Any, request: Any) -> tuple[Run, SafeString, str]:
    return run, render_run_interrupts(run=run, user=user, request=request), run_url(run)


def _rows(graph: str, user: Any) -> list[Interrupt]:
    rows = list(selectors.interrupts_pending(user=user, graph=graph))
    for row in rows:
        row.summary = question_summary(row.payload)  # type: ignore[attr-defined]  # template
    return rows


def inbox_context(*, user: Any, graph: str = "", request: Any = None) -> dict[str, Any]:
    """The inbox rows and, per run with pending questions, its answer fragment."""
    rows = _rows(graph, user)
    runs: dict[UUID, Run] = {}
    for row in rows:
        runs.setdefault(row.run_id, row.run)
    return {"nav": "inbox", "rows": rows, "graph": graph, "graphs": all_graphs(),
            "sections": [_section(run, user, request) for run in runs.values()],
            "single": None}


def inbox_update(*, user: Any, graph: str, known: PendingState | None
                 ) -> tuple[SafeString, PendingState]:
    """Out-of-band swaps that bring an inbox page from ``known`` to now, and the new state.

    Only runs whose pending questions changed are re-rendered, so an answer being typed
    into another run's form survives; ``known=None`` (a page just loaded) sends the rows only.
    A run whose questions were all answered keeps its place, saying so (its state keeps it
    with no question, so a new question of that run comes back in the same place).
    """
    rows = _rows(graph, user)
    state: dict[str, set[int]] = {}
    runs: dict[str, Run] = {}
    for row in rows:
        state.setdefault(str(row.run_id), set()).add(row.pk)
        runs[str(row.run_id)] = row.run
    now = {rid: frozenset(pks) for rid, pks in state.items()}
    parts: list[str] = [render_to_string("dashboard/_inbox_rows.html",
                              {"rows": rows, "graph": graph, "oob": True})]

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
