"""The timeline's filters: by node, by event kind, and whether bookkeeping rows show."""

from __future__ import annotations

from typing import Any

from django import forms

from dashboard.models import RunEvent


class TimelineFilterForm(forms.Form):
    """``?node=…&kind=…&bookkeeping=1`` of a run page; an unknown value names the known ones."""

    node = forms.ChoiceField(required=False, label="Node")
    kind = forms.ChoiceField(required=False, label="Kind",
                             choices=[("", "any kind"), *RunEvent.Kind.choices])
    bookkeeping = forms.BooleanField(required=False, label="Show bookkeeping")

    def __init__(self, *args: Any, nodes: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.nodes = nodes
        field = self.fields["node"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "any node"), *((n, n) for n in nodes)]
        known = (", ".join(nodes) or "none yet").replace("%", "%%")  # a message template
        field.error_messages["invalid_choice"] = (
            f"unknown node %(value)r; this run's nodes: {known}")
        kind = self.fields["kind"]
        kind.error_messages["invalid_choice"] = (
            "unknown kind %(value)r; kinds: " + ", ".join(RunEvent.Kind.values))

    def filters(self) -> dict[str, Any]:
        """The valid filters (a bad one is dropped: its error is shown, the rest applies)."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        return {"node": data.get("node") or "", "kind": data.get("kind") or "",
                "bookkeeping": bool(data.get("bookkeeping"))}
