"""Runs pages: the runs list (filterable, paged, updated live) and starting a run."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpResponseRedirect
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.utils import timezone

from dashboard import selectors, services
from dashboard.models import Run
from dashboard.web.forms.budget import BudgetForm
from dashboard.web.forms.debug import BreakpointsForm
from dashboard.web.forms.run_list import DEFAULT_SORT, RunListFilters
from dashboard.web.forms.run_start import RunStartForm
from dashboard.web.htmx import HtmxHttpRequest
from planner.registry import all_graphs, failed_graphs, get_graph

RUNS_PER_PAGE = 25


def run_list(request: HtmxHttpRequest) -> TemplateResponse:
    """The runs list: searched, filtered by graph, status and days, sorted, paged, and
    updated live; every filter stays in the URL. A bad filter is named beside the list
    (400 on a page load; htmx swaps only a 200, so its partial says it with a 200)."""
    form = RunListFilters(request.GET)
    form.is_valid()
    chosen = form.filters()
    live_since = timezone.now().isoformat()  # runs created later are added live
    page = Paginator(selectors.run_list(user=request.user, **chosen), RUNS_PER_PAGE).get_page(
        request.GET.get("page"))
    waits = selectors.runs_waits(run_ids=[run.id for run in page])
    for run in page:  # the same working time and waits as its header and waterfall
        run.figures = waits.get(str(run.id))  # type: ignore[attr-defined]
    template = "dashboard/_run_rows.html" if request.htmx else "dashboard/run_list.html"
    return TemplateResponse(request, template, {
        "page": page, "form": form, **chosen, "filtered": form.is_filtered,
        "graphs": all_graphs(), "statuses": Run.Status.choices, "live_since": live_since,
        "failed_graphs": failed_graphs(),
        "live_new": page.number == 1 and not form.is_filtered and chosen["sort"] == DEFAULT_SORT,
    }, status=400 if form.errors and not request.htmx else 200)


def run_new(request: HtmxHttpRequest) -> TemplateResponse | HttpResponseRedirect:
    """Pick a graph, fill its start form, start it; invalid input is shown inline."""
    graphs = all_graphs()
    name = request.POST.get("graph") or request.GET.get("graph") or (
        graphs[0].name if graphs else ""
    )
    can_start = request.user.has_perm("dashboard.start_run")
    try:
        spec = get_graph(name)
    except KeyError as exc:
        return TemplateResponse(request, "dashboard/run_new.html", {
            "graphs": graphs, "graph_error": exc.args[0], "can_start": can_start,
        }, status=400)
    data = request.POST if request.method == "POST" else None
    form = RunStartForm(data, graph=spec)
    budget = BudgetForm(data, prefix="budget")
    # breakpoints at start are for those who may debug runs
    breakpoints = BreakpointsForm(data, nodes=selectors.graph_debug_schema(
        graph=spec.name).nodes, prefix="bp") if request.user.has_perm(
        "dashboard.debug_run") else None
    if request.method == "POST":
        if not can_start:
            raise PermissionDenied("you need the 'Can start runs' permission to start a run")
        breaks_ok = breakpoints is None or breakpoints.is_valid()
        if form.is_valid() and breaks_ok and budget.is_valid():
            chosen = breakpoints.cleaned_data if breakpoints is not None else {}
            try:
                run = services.run_create(graph=spec.name, input=form.input_values(),
                                          user=request.user, options=services.RunOptions(
                                              interrupt_before=chosen.get("interrupt_before") or [],
                                              interrupt_after=chosen.get("interrupt_after") or [],
                                              budget=budget.budget()))
            except services.BudgetError as exc:
                budget.add_budget_errors(exc.errors)
            except services.RunInputError as exc:
                form.add_service_errors(exc.errors, exc.message)
            else:
                return redirect("dashboard:run_detail", run_id=run.id)
    status = 400 if form.is_bound else 200
    return TemplateResponse(request, "dashboard/run_new.html", {
        "graphs": graphs, "spec": spec, "form": form, "can_start": can_start, "nav": "new",
        "breakpoints_form": breakpoints, "budget_form": budget,
    }, status=status)
