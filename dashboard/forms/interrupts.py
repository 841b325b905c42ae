"""Answer forms built from an interrupt's payload, validated on the server."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from django import forms

from dashboard.models import Interrupt
from dashboard.services import MAX_ANSWER_BYTES

KNOWN_KINDS = ("choice", "text", "number", "region", "currency")
"""Payload kinds rendered as typed forms; anything else gets a JSON answer form."""

_CURRENCY = re.compile(r"^[A-Za-z]{3}$")
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$")


def question_of(payload: Any) -> dict[str, Any] | None:
    """The payload as a known question (a dict with a known ``kind``), else ``None``."""
    if isinstance(payload, dict) and payload.get("kind") in KNOWN_KINDS:
        return payload
    return None


def question_summary(payload: Any) -> dict[str, str]:
    """The field name and the question text of any payload, for lists and the audit trail."""
    if isinstance(payload, dict):
        text = payload.get("prompt") or payload.get("label") or payload.get("question")
        if text is not None:
            return {"field": str(payload.get("field") or ""), "text": str(text)}
    return {"field": "", "text": json.dumps(payload, ensure_ascii=False, default=str)}


def _choices(question: dict[str, Any]) -> list[str]:
    raw = question.get("choices")
    return [str(c) for c in raw] if isinstance(raw, list) else []


def _bound(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value.is_integer() else f"{value:g}"


class InterruptAnswerForm(forms.Form):
    """One interrupt's answer: typed by the payload's ``kind``, or JSON for unknown payloads."""

    def __init__(self, *args: Any, interrupt: Interrupt, **kwargs: Any) -> None:
        kwargs.setdefault("prefix", f"i{interrupt.pk}")
        super().__init__(*args, **kwargs)
        self.interrupt = interrupt
        self.question = question_of(interrupt.payload)
        self.kind = self.question["kind"] if self.question else "json"
        self.choices = _choices(self.question) if self.question else []
        self.fields["answer"] = self._field()
        q = self.question or {}
        self.display = {key: q.get(key) or "" for key in (
            "field", "label", "prompt", "unit", "attempt", "max_attempts", "reason", "task_id")}

    def _field(self) -> forms.Field:
        q = self.question or {}
        label = str(q.get("label") or q.get("prompt") or "Answer")
        limit = MAX_ANSWER_BYTES
        if self.kind in ("choice", "region") and self.choices:
            return forms.ChoiceField(label=label, choices=[("", "— choose —")] + [
                (c, c) for c in self.choices])
        if self.kind == "number":
            return forms.CharField(label=label, max_length=100, widget=forms.TextInput(
                attrs={"inputmode": "decimal", "autocomplete": "off"}))
        if self.kind == "currency":
            return forms.CharField(label=label, max_length=100, widget=forms.TextInput(
                attrs={"autocomplete": "off", "list": f"{self.prefix}-choices",
                       "size": 8}))
        if self.kind == "json":
            return forms.CharField(label="Answer (JSON)", max_length=limit,
                                   widget=forms.Textarea(attrs={"rows": 3}))
        min_length = (q.get("constraints") or {}).get("min_length") if isinstance(
            q.get("constraints"), dict) else None
        return forms.CharField(label=label, max_length=limit,
                               min_length=min_length if isinstance(min_length, int) else None,
                               widget=forms.Textarea(attrs={"rows": 2}))

    @property
    def constraints(self) -> dict[str, float]:
        """The payload's numeric bounds (``min``/``max``) that are real numbers."""
        raw = (self.question or {}).get("constraints")
        if not isinstance(raw, dict):
            return {}
        return {k: b for k in ("min", "max") if (b := _bound(raw.get(k))) is not None}

    @property
    def raw_payload(self) -> str:
        """The payload as indented JSON, for questions Planwatch does not recognise."""
        return json.dumps(self.interrupt.payload, indent=2, ensure_ascii=False, default=str)

    def clean_answer(self) -> Any:
        """Turn the posted text into the value the graph is resumed with."""
        text = self.cleaned_data["answer"]
        if self.kind == "number":
            return self._number(text)
        if self.kind == "currency":
            if not _CURRENCY.match(text):
                raise forms.ValidationError(
                    f"{text!r} is not a currency code; give a three-letter ISO 4217 code "
                    "such as EUR or USD")
            return text.upper()
        if self.kind == "json":
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise forms.ValidationError(
                    f"not valid JSON ({exc}); quote text like \"yes\", or give a number, "
                    "true/false, a list or an object") from None
            return value
        return text

    def _number(self, text: str) -> int | float:
        bounds = self.constraints
        percent = bounds.get("max") == 1 and text.endswith("%")
        body = text[:-1].strip() if percent else text
        if _THOUSANDS.match(body):
            body = body.replace(",", "")
        try:
            value = float(body) * (0.01 if percent else 1)
        except ValueError:
            raise forms.ValidationError(
                f"{text!r} is not a number; give a number such as 12.5") from None
        if not math.isfinite(value):
            raise forms.ValidationError(f"{text!r} is not a finite number; give one such as 12.5")
        low, high = bounds.get("min"), bounds.get("max")
        if (low is not None and value < low) or (high is not None and value > high):
            raise forms.ValidationError(
                f"{_fmt(value)} is out of range; give a number "
                f"from {_fmt(low) if low is not None else 'any'} "
                f"to {_fmt(high) if high is not None else 'any'}")
        return int(value) if value.is_integer() and abs(value) < 2**53 else value

    def clean(self) -> dict[str, Any]:
        """Refuse answers larger than the service accepts, with the limit in the message."""
        cleaned = super().clean()
        if "answer" in cleaned:
            size = len(json.dumps(cleaned["answer"], default=str))
            if size > MAX_ANSWER_BYTES:
                self.add_error("answer", f"the answer is {size:,} bytes; the limit is "
                                         f"{MAX_ANSWER_BYTES:,}. Shorten it.")
        return cleaned
