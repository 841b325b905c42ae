"""The start form of a run, built from the graph's registry entry (its ``input_fields``)."""

from __future__ import annotations

from typing import Any

from django import forms

from planner.registry import GraphSpec, InputField


def _field(spec: InputField) -> forms.Field:
    """The Django form field for one registry input field."""
    common: dict[str, Any] = {"label": spec.label, "help_text": spec.help,
                              "required": spec.required, "initial": spec.default}
    if spec.kind == "textarea":
        return forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), **common)
    if spec.kind == "integer":
        return forms.IntegerField(min_value=_bound(spec.min_value),
                                  max_value=_bound(spec.max_value), **common)
    if spec.kind == "number":
        return forms.FloatField(min_value=spec.min_value, max_value=spec.max_value, **common)
    if spec.kind == "choice":
        choices = [(c, c or "—") for c in spec.choices]
        if not spec.required and "" not in spec.choices:
            choices.insert(0, ("", "—"))
        return forms.ChoiceField(choices=choices, **common)
    if spec.kind == "boolean":
        return forms.BooleanField(**{**common, "required": False})
    if spec.kind == "json":
        return forms.JSONField(**common)
    return forms.CharField(**common)


def _bound(value: float | None) -> int | None:
    return None if value is None else int(value)


class RunStartForm(forms.Form):
    """Fields of one graph's start input; cleaned values go to ``run_create`` unchanged."""

    def __init__(self, *args: Any, graph: GraphSpec, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.graph = graph
        for spec in graph.input_fields:
            self.fields[spec.name] = _field(spec)

    def input_values(self) -> dict[str, Any]:
        """The cleaned values without empty optional ones (the graph fills its defaults)."""
        return {k: v for k, v in self.cleaned_data.items() if v not in ("", None)}

    def add_service_errors(self, errors: dict[str, str], message: str) -> None:
        """Show the service's per-field errors next to their fields, the rest on top."""
        for name, text in errors.items():
            self.add_error(name if name in self.fields else None, text)
        if not errors:
            self.add_error(None, message)
