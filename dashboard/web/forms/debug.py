"""Debugging forms: breakpoints, and a run's state at a checkpoint edited before a fork."""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from typing import Any

from django import forms

from dashboard.api.parsers import loads_bounded
from planner.spec import WHOLE_MAX, StateField

ANY_NODE = "*"

_SCALARS: dict[type, type[forms.Field]] = {
    bool: forms.BooleanField, int: forms.IntegerField, float: forms.FloatField,
    str: forms.CharField,
}
_BOUNDS: dict[type, dict[str, Any]] = {
    int: {"min_value": -WHOLE_MAX, "max_value": WHOLE_MAX}}
"""What a scalar field takes beyond its type: a whole number a checkpoint holds (64 bits)."""


class BreakpointsForm(forms.Form):
    """Nodes to pause before or after; ``*`` pauses at every node."""

    interrupt_before = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Pause before")
    interrupt_after = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Pause after")

    def __init__(self, *args: Any, nodes: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(n, n) for n in nodes] + [(ANY_NODE, "every node")]
        for name in ("interrupt_before", "interrupt_after"):
            typed = self.fields[name]
            assert isinstance(typed, forms.MultipleChoiceField)
            typed.choices = choices


class LocatedJSONField(forms.JSONField):
    """A JSON field whose error says where the JSON breaks (line and column)."""

    def to_python(self, value: Any) -> Any:
        """Parse the text; a syntax error names its line, column and what was expected."""
        if self.disabled or value in self.empty_values:
            return super().to_python(value)
        try:
            loads_bounded(value, name=str(self.label or "the value"))
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}; "
                'quote text like "yes", and use null, true and false',
                code="invalid") from None
        except ValueError as exc:  # a number nothing downstream holds, named
            raise forms.ValidationError(str(exc), code="invalid") from None
        return super().to_python(value)


def _scalar(annotation: Any) -> type | None:
    """The plain type a channel holds (``int``, ``str`` …), looking through ``X | None``."""
    if annotation in _SCALARS:
        return typing.cast(type, annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1 and args[0] in _SCALARS:
            return typing.cast(type, args[0])
    return None


class StateEditForm(forms.Form):
    """One field per state channel, typed from the graph's state schema (JSON otherwise).

    Only the channels whose value changed make the edit (:meth:`edit`); the graph's own
    schema check (in the service) has the last word.
    """

    def __init__(self, *args: Any, channels: dict[str, Any], values: dict[str, Any],
                 nodes: list[str], internal: tuple[str, ...] = (),
                 check: Any = None, fields: Mapping[str, tuple[StateField, ...]] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.current = values
        self.internal = frozenset(internal)
        self.check = check
        """``check(values, as_node) -> {channel: error}``: the graph's own check of an edit."""
        self.kinds: dict[str, str] = {}
        self.records: dict[str, tuple[StateField, ...]] = {}
        """Channels edited field by field (``GraphSpec.state_fields``), with their fields."""
        for name, annotation in channels.items():
            scalar = _scalar(annotation)
            value = values.get(name)
            declared = (fields or {}).get(name)
            if declared and (value is None or isinstance(value, Mapping)):
                # one box per field, checked as the graph's questions and start form check it
                self.records[name] = declared
                for spec in declared:
                    now = (value or {}).get(spec.name)
                    self.fields[f"ch_{name}.{spec.name}"] = forms.CharField(
                        required=False, label=f"{name}.{spec.name}",
                        initial="" if now is None else str(now),
                        help_text=f"{spec.label}{f' ({spec.hint})' if spec.hint else ''}")
                    self.kinds[f"{name}.{spec.name}"] = "field"
                continue
            if scalar is not None and (value is None or isinstance(value, scalar)):
                field = _SCALARS[scalar](required=False, label=name, initial=value,
                                         **_BOUNDS.get(scalar, {}))
                if scalar is str:
                    field.widget = forms.Textarea(attrs={"rows": 1})
                self.kinds[name] = scalar.__name__
            else:
                field = LocatedJSONField(required=False, label=name, initial=value,
                                        widget=forms.Textarea(attrs={"rows": 3}),
                                        help_text="JSON")
                self.kinds[name] = "json"
            self.fields[f"ch_{name}"] = field
        self.fields["as_node"] = forms.ChoiceField(
            required=False, label="Apply the edit as node",
            choices=[("", "— the node that wrote this checkpoint —")] + [(n, n) for n in nodes],
            help_text="Decides which node runs next, as if that node had returned the edit.")

    def channel_fields(self) -> list[tuple[str, str, forms.BoundField]]:
        """Each of the graph's own channels: name, kind (int, str, json …) and field."""
        return [(name, kind, self[f"ch_{name}"]) for name, kind in self.kinds.items()
                if name not in self.internal]

    def internal_fields(self) -> list[tuple[str, str, forms.BoundField]]:
        """The bookkeeping channels (shown folded, under "advanced")."""
        return [(name, kind, self[f"ch_{name}"]) for name, kind in self.kinds.items()
                if name in self.internal]

    def internal_errors(self) -> bool:
        """Whether a folded channel has an error (its fold then opens)."""
        return any(field.errors for _, _, field in self.internal_fields())

    def clean(self) -> dict[str, Any]:
        """Check the channels that parsed with the graph's own check too, so that every
        error (bad JSON, values of the wrong type, a field's bad value) comes back in one
        round."""
        cleaned = super().clean() or {}
        for channel, specs in self.records.items():
            for spec in specs:
                key = f"ch_{channel}.{spec.name}"
                raw = str(cleaned.get(key) or "").strip()
                if key not in cleaned or not raw:
                    continue
                value, reason = spec.check(raw)
                if reason:
                    self.add_error(key, reason)
                else:
                    cleaned[key] = value
        if self.check is None:
            return cleaned
        edit = self.edit()
        if not edit:
            return cleaned
        for name, text in self.check(edit, cleaned.get("as_node") or "").items():
            field: str | None = f"ch_{name}" if f"ch_{name}" in self.fields else (
                name if name in self.fields else None)
            if field is None or field not in self.errors:
                self.add_error(field, text)
        return cleaned

    def edit(self) -> dict[str, Any]:
        """The channels the operator changed, with their new values (after ``is_valid``)."""
        changed: dict[str, Any] = {}
        for channel, specs in self.records.items():
            old_record = self.current.get(channel)
            record = dict(old_record or {})
            for spec in specs:
                key = f"ch_{channel}.{spec.name}"
                if key not in self.cleaned_data:
                    continue  # did not pass its check: its error is reported already
                new = self.cleaned_data[key]
                if new == "" or new is None:
                    if record.get(spec.name) is not None:
                        record[spec.name] = None  # emptied: the field is to be found again
                elif _differs(new, record.get(spec.name)):
                    record[spec.name] = new
            if record != (old_record or {}):
                changed[channel] = record
        for name, kind in self.kinds.items():
            if kind == "field":
                continue
            if f"ch_{name}" not in self.cleaned_data:
                continue  # did not parse: its error is reported already
            new = self.cleaned_data.get(f"ch_{name}")
            old = self.current.get(name)
            if kind == "bool" and old is None and new is False:
                continue  # an unset flag shown unticked
            if kind == "str" and old is None and new == "":
                continue
            if _differs(new, old):
                changed[name] = new
        return changed


def _differs(new: Any, old: Any) -> bool:
    """Whether two values differ as JSON (``47.88`` and ``"47.88"`` do)."""
    return json.dumps(new, sort_keys=True, default=str) != json.dumps(old, sort_keys=True,
                                                                      default=str)


class ModelSettingsForm(forms.Form):
    """A fork's model, its parameters and its graph's declared prompts, as text; the graph
    checks them (``services.model_settings_check``), naming each bad field."""

    model = forms.CharField(
        required=False, max_length=200, label="Model",
        help_text="Blank: the deployment's (PLANWATCH_LLM). 'scripted', or a provider's "
                  "model: openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, ollama:llama3.")
    temperature = forms.CharField(required=False, max_length=40, label="Temperature",
                                  help_text="0 to 2; blank: the model's own.")
    max_tokens = forms.CharField(required=False, max_length=40, label="Max tokens",
                                 help_text="Per answer, 1 to 1,000,000; blank: the model's own.")

    def __init__(self, *args: Any, prompts: Mapping[str, Any], takes_model: bool,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.prompts = prompts
        if not takes_model:
            for name in ("model", "temperature", "max_tokens"):
                del self.fields[name]
        for name, template in prompts.items():
            self.fields[f"prompt_{name}"] = forms.CharField(
                required=False, label=template.label, initial=template.template,
                widget=forms.Textarea(attrs={"rows": 4, "class": "mono"}),
                help_text=f"{template.help} Placeholders: "
                          f"{', '.join('{' + f + '}' for f in template.fields)}.")

    def settings(self) -> dict[str, Any]:
        """What was filled in, as the service takes it (prompts unchanged are left out)."""
        data = self.cleaned_data
        found = {k: data[k].strip() for k in ("model", "temperature", "max_tokens")
                 if (data.get(k) or "").strip()}
        prompts = {name: data[f"prompt_{name}"].replace("\r\n", "\n")
                   for name, template in self.prompts.items()
                   if (data.get(f"prompt_{name}") or "").strip()
                   and data[f"prompt_{name}"].replace("\r\n", "\n") != template.template}
        if prompts:
            found["prompts"] = prompts
        return found

    def add_errors(self, errors: Mapping[str, str]) -> None:
        """The service's errors on their fields (``prompts.plan`` on ``prompt_plan``)."""
        for name, text in errors.items():
            field = name.replace("prompts.", "prompt_", 1) if name.startswith("prompts.") \
                else name
            self.add_error(field if field in self.fields else None, text)


FORK_WAYS = 4
"""The rows of the "fork N ways" form."""


class ForkWaysForm(forms.Form):
    """Several forks from one checkpoint, one per row (model, temperature, max tokens);
    blank rows are left out."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for i in range(1, FORK_WAYS + 1):
            self.fields[f"way{i}_model"] = forms.CharField(
                required=False, max_length=200, label=f"Way {i}: model")
            self.fields[f"way{i}_temperature"] = forms.CharField(
                required=False, max_length=40, label=f"Way {i}: temperature")
            self.fields[f"way{i}_max_tokens"] = forms.CharField(
                required=False, max_length=40, label=f"Way {i}: max tokens")

    def rows(self) -> list[list[forms.BoundField]]:
        """The fields, a row per way (for the template)."""
        return [[self[f"way{i}_{k}"] for k in ("model", "temperature", "max_tokens")]
                for i in range(1, FORK_WAYS + 1)]

    def ways(self) -> list[tuple[int, dict[str, Any]]]:
        """The rows filled in: their number and model choice."""
        found = []
        for i in range(1, FORK_WAYS + 1):
            way = {k: v.strip() for k in ("model", "temperature", "max_tokens")
                   if (v := self.cleaned_data.get(f"way{i}_{k}") or "").strip()}
            if way:
                found.append((i, way))
        return found
