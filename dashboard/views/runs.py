"""Runs pages: the runs list (filterable, paged, updated live)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest
from django.template.response import TemplateResponse

from dashboard import selectors
from dashboard.models import Run
from planner.registry import all_graphs

RUNS_PER_PAGE = 25


def run_list(request: HttpRequest) -> TemplateResponse:
    """The runs list, filterable by graph and status, paged, updated live."""
    graph = request.GET.get("graph", "")
    status = request.GET.get("status", "")
    if status not in Run.Status.values:
        status = ""
    page = Paginator(selectors.run_list(graph=graph, status=status), RUNS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    template = "dashboard/_run_rows.html" if request.htmx else "dashboard/run_list.html"
    return TemplateResponse(request, template, {
        "page": page, "graph": graph, "status": status,
        "graphs": all_graphs(), "statuses": Run.Status.choices,
    })
