"""The new-run form's budgets: each limit as typed, checked by the one budget parser."""

from __future__ import annotations

from typing import Any

from django import forms

LIMIT_FIELDS = {
    "max_tokens": ("Max tokens", "tokens its model calls report, input and output"),
    "max_cost_usd": ("Max cost (USD)", "priced by PLANWATCH_MODEL_PRICES"),
    "max_model_calls": ("Max model calls", ""),
    "max_working_minutes": ("Max working minutes", "waits for people left out"),
    "max_wall_minutes": ("Max wall minutes", "from its start"),
}


class BudgetForm(forms.Form):
    """A new run's own budgets, over the server's, its graph's and its assistant's; empty
    fields leave theirs. The values go as typed to the service, whose parser names a bad
    one (:meth:`add_budget_errors`)."""

    on_limit = forms.ChoiceField(required=False, label="At a limit", choices=[
        ("", "as its graph says"), ("pause", "pause and ask to extend"),
        ("stop", "stop the run")])
    warn_at = forms.CharField(required=False, max_length=20, label="Warn at (share)",
                              help_text="0.8: a warning at 80 % of a limit")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        limits = {name: forms.CharField(required=False, max_length=30, label=label,
                                        help_text=hint,
                                        widget=forms.TextInput(attrs={"inputmode": "decimal"}))
                  for name, (label, hint) in LIMIT_FIELDS.items()}
        self.fields = {**limits, **self.fields}

    def budget(self) -> dict[str, Any] | None:
        """The budgets filled in, as the service takes them (None: none)."""
        data = self.cleaned_data if hasattr(self, "cleaned_data") else {}
        chosen = {name: value.strip() for name, value in data.items()
                  if isinstance(value, str) and value.strip()}
        return chosen or None

    def add_budget_errors(self, errors: dict[str, str]) -> None:
        """Show the parser's errors (``budget.max_tokens``) beside their fields."""
        for name, message in errors.items():
            field = name.split(".")[1] if name.count(".") >= 1 else ""
            self.add_error(field if field in self.fields else None, message)
