"""The crons page: every scheduled run with its next and last run."""

from __future__ import annotations

from django.http import HttpRequest
from django.template.response import TemplateResponse

from dashboard import health, selectors


def cron_list(request: HttpRequest) -> TemplateResponse:
    """Scheduled runs (LangGraph's crons), soonest first."""
    scheduler = health.check_duties().detail.get("crons") or {}
    return TemplateResponse(request, "dashboard/crons.html",
                            {"nav": "crons", "crons": selectors.crons_listed(user=request.user),
                             "scheduler_problem": scheduler.get("error", "")})
