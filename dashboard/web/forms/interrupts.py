"""Answer forms built from an interrupt's payload, validated on the server."""

from __future__ import annotations

import json
import math
from typing import Any

from django import forms

from dashboard.api.parsers import loads_bounded
from dashboard.models import Interrupt
from dashboard.services import MAX_ANSWER_BYTES
from planner.questions import QuestionKind, question_kind


def question_of(interrupt: Interrupt) -> tuple[dict[str, Any], QuestionKind] | None:
    """The payload and its kind, if the run's graph (or the generic kinds) knows it."""
    try:
        declared = interrupt.run.spec.questions
    except KeyError:  # the graph is no longer registered: generic kinds only
        declared = {}
    kind = question_kind(declared, interrupt.payload)
    if kind is None:
        return None
    return interrupt.payload, kind


def question_summary(payload: Any) -> dict[str, str]:
    """The field name, the title (the ``label`` the graph gives the question, "" when it
    gives none: never its field id) and the question text of any payload, for lists and
    the audit trail."""
    if isinstance(payload, dict):
        text = payload.get("prompt") or payload.get("label") or payload.get("question")
        if text is not None:
            label = payload.get("label")
            title = str(label) if isinstance(label, str) and label != text else ""
            return {"field": str(payload.get("field") or ""), "title": title, "text": str(text)}
    return {"field": "", "title": "", "text": json.dumps(payload, ensure_ascii=False,
                                                          default=str)}


class InterruptAnswerForm(forms.Form):
    """One interrupt's answer, checked by the graph's own check for its kind of question.

    Questions of no known kind get a JSON answer. A form never accepts what the graph
    would refuse: both call the same check (``GraphSpec.questions`` / ``planner.questions``).
    """

    def __init__(self, *args: Any, interrupt: Interrupt, **kwargs: Any) -> None:
        kwargs.setdefault("prefix", f"i{interrupt.pk}")
        super().__init__(*args, **kwargs)
        self.interrupt = interrupt
        known = question_of(interrupt)
        self.question: dict[str, Any] | None = known[0] if known else None
        self.question_kind: QuestionKind | None = known[1] if known else None
        # a question asked as plain text (``interrupt("Which city?")``) names no schema:
        # it is answered with text; any other payload of no known kind, with JSON
        self.plain = isinstance(interrupt.payload, str)
        payload = interrupt.payload
        asked = isinstance(payload, dict) and any(
            isinstance(payload.get(k), str) for k in ("prompt", "label", "question"))
        self.question_text = (payload if self.plain else
                              question_summary(payload)["text"] if asked else "")
        """The question's own words when it has some (plain text, or a prompt/question key)."""
        self.widget = (self.question_kind.widget if self.question_kind
                       else "text" if self.plain else "json")
        self.kind = str(self.question["kind"]) if self.question else "json"
        raw = (self.question or {}).get("choices")
        self.choices = [str(c) for c in raw] if isinstance(raw, list) else []
        self.hint = self.question_kind.hint if self.question_kind else ""
        self.fields["answer"] = self._field()
        suggested = (self.question or {}).get("suggested")
        if isinstance(suggested, str) and suggested:  # what the goal names; the check decides
            self.fields["answer"].initial = suggested
        q = self.question or {}
        self.display = {key: q.get(key) or "" for key in (
            "field", "label", "prompt", "unit", "attempt", "max_attempts", "reason", "task_id")}

    def _field(self) -> forms.Field:
        q = self.question or {}
        label = str(q.get("label") or q.get("prompt") or (
            self.interrupt.payload[:200] if self.plain else "Answer"))
        if self.widget == "choice" and self.choices:
            return forms.ChoiceField(label=label, choices=[("", "— choose —")] + [
                (c, c) for c in self.choices])
        if self.widget == "number":
            return forms.CharField(label=label, max_length=100, widget=forms.TextInput(
                attrs={"inputmode": "decimal", "autocomplete": "off"}))
        if self.widget == "suggest":
            return forms.CharField(label=label, max_length=100, widget=forms.TextInput(
                attrs={"autocomplete": "off", "list": f"{self.prefix}-choices", "size": 20}))
        if self.widget == "json":
            return forms.CharField(label="Answer (JSON)", max_length=MAX_ANSWER_BYTES,
                                   widget=forms.Textarea(attrs={"rows": 3}))
        return forms.CharField(label=label, max_length=MAX_ANSWER_BYTES, required=False,
                               widget=forms.Textarea(attrs={"rows": 2}))

    @property
    def constraints(self) -> dict[str, float]:
        """The payload's numeric bounds (``min``/``max``) that are real numbers."""
        raw = (self.question or {}).get("constraints")
        if not isinstance(raw, dict):
            return {}
        return {k: float(b) for k in ("min", "max")
                if isinstance(b := raw.get(k), int | float) and not isinstance(b, bool)
                and math.isfinite(b)}

    @property
    def raw_payload(self) -> str:
        """The payload as indented JSON, for questions Planwatch does not recognise."""
        return json.dumps(self.interrupt.payload, indent=2, ensure_ascii=False, default=str)

    def clean_answer(self) -> Any:
        """Turn the posted text into the value the graph is resumed with (its own check)."""
        text = self.cleaned_data["answer"]
        if self.question_kind is not None and self.question is not None:
            value, reason = self.question_kind.check(self.question, text)
            if reason is not None:
                raise forms.ValidationError(reason)
            return value
        if self.plain:
            return text
        try:
            return loads_bounded(text, name="answer")
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"not valid JSON ({exc}); quote text like \"yes\", or give a number, "
                "true/false, a list or an object") from None
        except ValueError as exc:  # a number nothing downstream holds, named
            raise forms.ValidationError(str(exc)) from None

    def clean(self) -> dict[str, Any]:
        """Refuse answers larger than the service accepts, with the limit in the message."""
        cleaned = super().clean() or {}
        if "answer" in cleaned:
            size = len(json.dumps(cleaned["answer"], default=str))
            if size > MAX_ANSWER_BYTES:
                self.add_error("answer", f"the answer is {size:,} bytes; the limit is "
                                         f"{MAX_ANSWER_BYTES:,}. Shorten it.")
        return cleaned
