"""The inbox's filters and its answer-many form, read at the door: a bad value is named."""

from __future__ import annotations

from typing import Any

from django import forms

from dashboard import selectors
from dashboard.models import Interrupt
from dashboard.web.forms.run_list import DayField

PAGE_SIZE = 50
"""Questions a page of the inbox lists (paged in SQL)."""

AGE_CHOICES = [("", "Any age"), ("1m", "Waiting 1 min or more"),
               ("10m", "Waiting 10 min or more"), ("1h", "Waiting 1 h or more"),
               ("1d", "Waiting 1 day or more")]
FOR_CHOICES = [("", "Anyone's"), ("me", "Taken by me"), ("groups", "For my groups"),
               ("free", "Not taken yet")]
SORT_CHOICES = [("oldest", "Oldest first"), ("newest", "Newest first")]


class InboxFilters(forms.Form):
    """What the inbox is searched, filtered, sorted and paged by; every value in the URL."""

    q = forms.CharField(required=False, max_length=selectors.RUN_SEARCH_MAX, strip=True,
                        label="Search",
                        help_text="Words of the goal or the question, or the start of a run id.")
    graph = forms.CharField(required=False, max_length=100)
    question = forms.CharField(required=False, max_length=1000)
    older_than = forms.ChoiceField(required=False, choices=AGE_CHOICES, label="Age")
    assigned = forms.ChoiceField(required=False, choices=FOR_CHOICES, label="For")
    sort = forms.ChoiceField(required=False, choices=SORT_CHOICES, label="Sort")
    page = forms.IntegerField(required=False, min_value=1, max_value=100_000)

    def filters(self) -> dict[str, Any]:
        """The valid filters as :func:`dashboard.selectors.interrupts_inbox` takes them; a
        bad field filters nothing (its message says so)."""
        data = self.cleaned_data if hasattr(self, "cleaned_data") else {}
        return {"q": data.get("q") or "", "graph": data.get("graph") or "",
                "question": data.get("question") or "",
                "older_than": data.get("older_than") or "",
                "assigned": data.get("assigned") or "",
                "sort": data.get("sort") or "oldest"}

    def page_number(self) -> int:
        """The page asked for (1 when none, or a bad one)."""
        data = self.cleaned_data if hasattr(self, "cleaned_data") else {}
        return int(data.get("page") or 1)


class BulkAnswer(forms.Form):
    """Which pending questions one answer goes to (their primary keys), and the answer's
    text as the question's form posts it."""

    interrupt = forms.TypedMultipleChoiceField(coerce=int, choices=[], label="Questions")
    answer = forms.CharField(required=False, max_length=64 * 1024)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # any id is a candidate; the service refuses those that are not pending
        posted = self.data.getlist("interrupt") if hasattr(self.data, "getlist") else []
        field = self.fields["interrupt"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(p, p) for p in posted if str(p).isdigit()][:500]


OUTCOME_CHOICES = [("", "Any outcome"), ("answered", "Answered"), ("expired", "Expired"),
                   ("withdrawn", "Withdrawn")]


class HistoryFilters(forms.Form):
    """What the history of answered and withdrawn questions is filtered by (in the URL)."""

    q = forms.CharField(required=False, max_length=selectors.RUN_SEARCH_MAX, strip=True,
                        label="Search")
    graph = forms.CharField(required=False, max_length=100)
    question = forms.CharField(required=False, max_length=1000)
    outcome = forms.ChoiceField(required=False, choices=OUTCOME_CHOICES, label="Outcome")
    via = forms.ChoiceField(required=False, label="Channel", choices=[
        ("", "Any channel"), *Interrupt.Channel.choices])
    by = forms.CharField(required=False, max_length=150, label="Answered by")
    since = DayField(required=False, label="Asked from")
    until = DayField(required=False, label="Asked to")
    page = forms.IntegerField(required=False, min_value=1, max_value=100_000)

    def filters(self) -> dict[str, Any]:
        """The valid filters as :func:`dashboard.selectors.interrupts_history` takes them."""
        data = self.cleaned_data if hasattr(self, "cleaned_data") else {}
        return {name: data.get(name) or ("" if name not in ("since", "until") else None)
                for name in ("q", "graph", "question", "outcome", "via", "by", "since",
                             "until")}

    def page_number(self) -> int:
        """The page asked for (1 when none, or a bad one)."""
        data = self.cleaned_data if hasattr(self, "cleaned_data") else {}
        return int(data.get("page") or 1)
