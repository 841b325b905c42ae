"""The start form of a run, built from the graph's registry entry (its ``input_fields``).

The form only lays the fields out; their values are cleaned by the graph's own rules
(``planner.spec.clean_inputs``), as for the API, so every error shows at once and says
the same thing everywhere.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms

from dashboard.api.parsers import loads_bounded
from planner.registry import GraphSpec, InputError, InputField, clean_inputs


def _field(spec: InputField) -> forms.Field:
    """The Django form field (a widget; no rules of its own) for one input field."""
    common: dict[str, Any] = {"label": spec.label, "help_text": spec.help,
                              "required": False, "initial": spec.default}
    if spec.kind == "textarea":
        return forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), strip=False, **common)
    if spec.kind in ("integer", "number"):
        attrs = {"inputmode": "numeric" if spec.kind == "integer" else "decimal"}
        return forms.CharField(widget=forms.TextInput(attrs=attrs), **common)
    if spec.kind == "choice":
        choices = [(c, c) for c in spec.choices]
        if spec.default in (None, "") and "" not in spec.choices:
            choices.insert(0, ("", "—"))
        return forms.ChoiceField(choices=choices, **common)
    if spec.kind == "boolean":
        return forms.BooleanField(**common)
    if spec.kind == "json":
        return forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), **common)
    return forms.CharField(**common)


class RunStartForm(forms.Form):
    """Fields of one graph's start input; cleaned by the graph's rules, errors all at once."""

    def __init__(self, *args: Any, graph: GraphSpec, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.graph = graph
        for spec in graph.input_fields:
            self.fields[spec.name] = _field(spec)
        self.fields_by_name = {spec.name: spec for spec in graph.input_fields}

    def clean(self) -> dict[str, Any]:
        """Clean every value with the graph's rules; put each error next to its field."""
        raw = {name: value for name, value in (super().clean() or {}).items()
               if name in self.fields_by_name}
        for name, spec in self.fields_by_name.items():
            if spec.kind == "json" and isinstance(raw.get(name), str) and raw[name].strip():
                raw[name] = _json(raw[name], self, name)
        try:
            return clean_inputs(self.graph.input_fields, raw)
        except InputError as exc:
            self.add_service_errors(exc.errors, str(exc))
            return {}

    def input_values(self) -> dict[str, Any]:
        """The cleaned values (defaults filled in), as the service takes them."""
        return dict(self.cleaned_data)

    def add_service_errors(self, errors: dict[str, str], message: str) -> None:
        """Show per-field errors next to their fields, the rest on top."""
        for name, text in errors.items():
            self.add_error(name if name in self.fields else None, text)
        if not errors:
            self.add_error(None, message)


def _json(text: str, form: RunStartForm, name: str) -> Any:
    """A JSON field's text parsed (an error on the field if it is not JSON)."""
    try:
        return loads_bounded(text, name=name)
    except json.JSONDecodeError as exc:
        form.add_error(name, f"not valid JSON ({exc}); give a JSON value")
    except ValueError as exc:  # a number nothing downstream holds, named
        form.add_error(name, str(exc))
    return None
