"""The history of questions: answered and withdrawn, filtered, with answer times; CSV."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import HttpRequest, StreamingHttpResponse
from django.template.response import TemplateResponse

from dashboard import selectors
from dashboard.web.forms.inbox import OUTCOME_CHOICES, PAGE_SIZE, HistoryFilters
from dashboard.web.presentation.history import csv_lines, history_row
from planner.registry import all_graphs


def _filters(request: HttpRequest) -> tuple[HistoryFilters, dict[str, Any]]:
    form = HistoryFilters(request.GET)
    form.is_valid()
    return form, form.filters()


def history(request: HttpRequest) -> TemplateResponse:
    """Questions that no longer wait: who or what answered, through which channel, when,
    how long each waited; per graph and question the median and p90 time to answer."""
    form, filters = _filters(request)
    found = selectors.interrupts_history(user=request.user, **filters)
    page = Paginator(found, PAGE_SIZE).get_page(form.page_number())
    kept = {k: (v.isoformat() if hasattr(v, "isoformat") else v)
            for k, v in filters.items() if v}
    problems = "; ".join(f"{name}: {' '.join(str(e) for e in errs)}"
                         for name, errs in form.errors.items())
    return TemplateResponse(request, "dashboard/history.html", {
        "nav": "inbox", "page": page, "rows": [history_row(i) for i in page.object_list],
        "times": selectors.interrupts_answer_times(found), "filters": filters,
        "graphs": all_graphs(), "graph": filters["graph"], "outcomes": OUTCOME_CHOICES,
        "channels": HistoryFilters.base_fields["via"].choices,  # type: ignore[attr-defined]
        "query": urlencode(kept), "filter_errors": problems})


class _Echo:
    """A file whose ``write`` hands the line back (csv.writer into a streaming response)."""

    def write(self, value: str) -> str:
        return value


def history_csv(request: HttpRequest) -> StreamingHttpResponse:
    """The filtered history as CSV, every row (streamed, read in chunks)."""
    _, filters = _filters(request)
    writer = csv.writer(_Echo())
    rows = selectors.interrupts_history(user=request.user, **filters).iterator(
        chunk_size=500)

    def lines() -> Iterator[str]:
        for cells in csv_lines(rows):
            yield writer.writerow(cells)

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="planwatch-questions.csv"'
    return response
