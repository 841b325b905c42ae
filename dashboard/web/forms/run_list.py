"""The runs list's filters, read from the query string: a bad value is named, never a 500."""

from __future__ import annotations

from datetime import date
from typing import Any

from django import forms

from dashboard import selectors
from dashboard.models import Run

DEFAULT_SORT = "-started"


class DayField(forms.DateField):
    """A day as ``YYYY-MM-DD`` (what a date input sends); a refusal quotes the value."""

    input_formats = ["%Y-%m-%d"]

    def to_python(self, value: Any) -> date | None:
        """The day, or a message naming the bad value and the format that works."""
        try:
            return super().to_python(value)
        except forms.ValidationError:
            raise forms.ValidationError(
                f"{str(value)[:40]!r} is not a date; give one as YYYY-MM-DD, such as "
                f"{date.today().isoformat()}", code="invalid") from None


class RunListFilters(forms.Form):
    """What the runs list is filtered and sorted by; every value is kept in the URL."""

    q = forms.CharField(required=False, max_length=selectors.RUN_SEARCH_MAX, strip=True,
                        label="Search", help_text="Words of the goal, or the start of a run id.")
    graph = forms.CharField(required=False, max_length=100)
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), *Run.Status.choices])
    """The status the list shows: a finished run's is read from its outcome (a failed plan,
    or a run its budget stopped, is failed)."""
    outcome = forms.ChoiceField(required=False, choices=[("", "Any outcome"),
                                                         *Run.Outcome.choices])
    """A finished run's outcome, as stored when it stopped."""
    budget = forms.ChoiceField(required=False, label="Budget", choices=[
        ("", "Any budget"), ("reached", "Reached a budget")])
    """Runs that reached one of their budgets (paused or stopped there)."""
    since = DayField(required=False, label="Started from")
    until = DayField(required=False, label="Started to")
    sort = forms.CharField(required=False, max_length=40)
    """An order of :data:`~dashboard.selectors.RUN_SORTS`; any other (an old link's) is
    the default, newest first."""

    def clean(self) -> dict[str, Any]:
        """A range that ends before it starts is refused (the rule the API applies too)."""
        data = super().clean() or {}
        problem = selectors.run_dates_problem(since=data.get("since"), until=data.get("until"))
        if problem:
            self.add_error("until", problem)
        return data

    def filters(self) -> dict[str, Any]:
        """The valid filters as :func:`dashboard.selectors.run_list` takes them; a bad field
        filters nothing (its message says so)."""
        data = self.cleaned_data if hasattr(self, "cleaned_data") else {}
        return {"graph": data.get("graph") or "", "shown": data.get("status") or "",
                "outcome": data.get("outcome") or "", "budget": data.get("budget") or "",
                "q": data.get("q") or "", "since": data.get("since"),
                "until": data.get("until"), "sort": data.get("sort") if data.get("sort")
                in selectors.RUN_SORTS else DEFAULT_SORT}

    def problems(self) -> list[tuple[str, str]]:
        """Each bad filter's label and what is wrong with it, for the line above the list."""
        return [(str(self.fields[name].label or name.title()) if name in self.fields
                 else "Filters", str(message).rstrip("."))
                for name, messages in self.errors.items() for message in messages]

    @property
    def is_filtered(self) -> bool:
        """Whether any filter narrows the list (sorting and paging aside)."""
        chosen = self.filters()
        return any(chosen[name] for name in ("graph", "shown", "outcome", "budget", "q",
                                                 "since", "until"))
