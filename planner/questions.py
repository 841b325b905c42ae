"""Questions a graph asks through ``interrupt()``: how each kind is asked and checked.

A question is the interrupt's payload, a dict with a ``kind`` (and ``prompt``, ``choices``,
``constraints`` …). A graph declares the kinds it asks on its ``GraphSpec.questions``, each
with the check its own nodes use, so a form never accepts what the graph would refuse.
The generic kinds below (choice, text, number) serve every graph; a payload of no known
kind is answered as JSON.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Checked = tuple[Any, None] | tuple[None, str]
"""``(value, None)`` for a good answer, ``(None, reason)`` naming the problem otherwise."""

AnswerCheck = Callable[[Mapping[str, Any], Any], Checked]
"""``check(question, raw_answer)``: the value the graph is resumed with, or why not."""

Widget = Literal["choice", "suggest", "text", "number"]

_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$")


@dataclass(frozen=True)
class QuestionKind:
    """One kind of question: the form control that asks it, and the graph's own check."""

    widget: Widget
    """``choice`` (a list), ``suggest`` (text with suggestions), ``text`` or ``number``."""
    check: AnswerCheck
    hint: str = ""
    """One line under the control (what is accepted)."""


def text_of(raw: Any) -> str:
    """An answer as stripped text ("" for None)."""
    return "" if raw is None else str(raw).strip()


def check_number(raw: Any, *, low: float | None = None, high: float | None = None,
                 percent: bool = False) -> Checked:
    """A finite number (a number, or text like ``"12.5"``, ``"1,000"``) within bounds.

    With ``percent``, ``"18%"`` means 0.18 (shares are stored as fractions). A refusal
    quotes the answer as it was typed.
    """
    if isinstance(raw, bool):
        return None, f"{raw!r} is not a number; give a number such as 12.5"
    typed: Any = raw if isinstance(raw, int | float) else text_of(raw)
    if isinstance(raw, int | float):
        value = float(raw)
    else:
        text = text_of(raw)
        if not text:
            return None, "the answer was empty; give a number such as 12.5"
        scale = 1.0
        if percent and text.endswith("%"):
            text, scale = text[:-1].strip(), 0.01
        if _THOUSANDS.match(text):
            text = text.replace(",", "")
        try:
            value = float(text.replace("_", "")) * scale
        except ValueError:
            return None, f"{typed!r} is not a number; give a number such as 12.5"
    if not math.isfinite(value):
        return None, f"{typed!r} is not a finite number; give a number such as 12.5"
    if (low is not None and value < low) or (high is not None and value > high):
        return None, f"{typed} is out of range; give a number {_bounds(low, high)}"
    return (int(value) if value.is_integer() and abs(value) < 2**53 else value), None


def _bounds(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"from {fmt(low)} to {fmt(high)}"
    return f"of at least {fmt(low)}" if low is not None else f"of at most {fmt(high)}"


def fmt(value: float | None) -> str:
    """A bound as people write it (``1,000,000``, ``0.5``)."""
    if value is None:
        return "any"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"


def _bound(constraints: Any, name: str) -> float | None:
    value = constraints.get(name) if isinstance(constraints, Mapping) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _choices(question: Mapping[str, Any]) -> list[str]:
    raw = question.get("choices")
    return [str(c) for c in raw] if isinstance(raw, list) else []


def check_choice(question: Mapping[str, Any], raw: Any) -> Checked:
    """One of the question's ``choices`` (any case) -> the choice as offered."""
    text, choices = text_of(raw), _choices(question)
    match = next((c for c in choices if c.casefold() == text.casefold()), None)
    if match is not None:
        return match, None
    if not text:
        return None, f"the answer was empty; choose one of: {', '.join(choices)}"
    return None, f"{text!r} is not one of: {', '.join(choices)}"


def check_text(question: Mapping[str, Any], raw: Any) -> Checked:
    """Text, at least ``constraints.min_length`` characters (1 by default)."""
    text = text_of(raw)
    constraints = question.get("constraints")
    minimum = constraints.get("min_length") if isinstance(constraints, Mapping) else None
    minimum = minimum if isinstance(minimum, int) and not isinstance(minimum, bool) else 1
    if len(text) < minimum:
        return None, ("the answer was empty; please type an answer" if not text else
                      f"the answer is {len(text)} characters; give at least {minimum}")
    return text, None


def check_bounded_number(question: Mapping[str, Any], raw: Any) -> Checked:
    """A number within the question's ``constraints`` (``min``/``max``; a 0-1 share takes %)."""
    constraints = question.get("constraints")
    low, high = _bound(constraints, "min"), _bound(constraints, "max")
    return check_number(raw, low=low, high=high, percent=high == 1)


GENERIC: dict[str, QuestionKind] = {
    "choice": QuestionKind("choice", check_choice),
    "text": QuestionKind("text", check_text),
    "number": QuestionKind("number", check_bounded_number,
                           hint="Digits, with 1,000 separators if you like."),
}
"""Kinds every graph may ask without declaring them."""


def question_kind(kinds: Mapping[str, QuestionKind], question: Any) -> QuestionKind | None:
    """The kind that asks ``question`` (the graph's own first, then generic), or None."""
    if not isinstance(question, Mapping):
        return None
    kind = question.get("kind")
    if not isinstance(kind, str):
        return None
    return kinds.get(kind) or GENERIC.get(kind)


FEW_CHOICES = 12
"""Choices a question's text lists in words; a longer list (the ~250 countries) is offered
as choices only (a form's list, an inbox's schema), never as prose."""


def question_text(question: Mapping[str, Any]) -> str:
    """A question in a few plain sentences, as a chat transcript or an inbox shows it: why
    the last answer was refused, the prompt, a suggestion, and the choices if they are few."""
    lines = []
    if question.get("reason"):
        lines.append(f"The last answer was refused: {text_of(question['reason'])}")
    lines.append(text_of(question.get("prompt")) or "Answer the question.")
    choices = _choices(question)
    if choices and len(choices) <= FEW_CHOICES:
        lines.append(f"Choose one of: {', '.join(choices)}.")
    elif choices:
        lines.append(f"Any of {len(choices)} choices; type to search them.")
    if text_of(question.get("suggested")):
        lines.append(f"Suggested: {text_of(question['suggested'])}.")
    return "\n\n".join(lines)


# -- the standard interrupt shapes of chat clients and inboxes ---------------------------
#
# Agent Chat UI answers an interrupt shaped as LangChain's HumanInTheLoopMiddleware asks
# (``action_requests`` / ``review_configs``; it resumes with ``{"decisions": [...]}``);
# Agent Inbox reads that shape too, and the older ``HumanInterrupt`` one (``action_request``,
# ``config``, ``description``; it resumes with ``[{"type": ..., "args": ...}]``). A question
# is offered in both, beside its own keys, as one action: "answer it", whose one argument
# is the answer an operator edits in.

REVIEW_TYPES = ("accept", "approve", "edit", "response", "reject", "ignore")
"""The decision types of both shapes (``approve``/``reject`` are the newer names)."""


def review_request(question: Mapping[str, Any]) -> dict[str, Any]:
    """The keys that offer ``question`` in the standard interrupt shapes: its text
    (:func:`question_text`, short) as the description, an editable ``answer`` as the
    argument (``args`` and ``arguments``: Agent Chat UI reads the one, Agent Inbox the
    other), pre-filled with the suggestion, if any, which is then also accepted as it is;
    the choices as the argument's schema. The question may be declined (an inbox's Ignore,
    a chat client's Reject) unless it says ``"declinable": False``."""
    action = str(question.get("field") or question.get("kind") or "answer")
    description = question_text(question)
    suggested = text_of(question.get("suggested"))
    args = {"answer": suggested}
    answer: dict[str, Any] = {"type": "string", "title": "Answer"}
    if choices := _choices(question):
        # a choice question takes only its choices; the others offer them as suggestions
        answer["enum" if question.get("kind") == "choice" else "examples"] = choices
    declinable = question.get("declinable", True) is not False
    decisions = ["approve"] if suggested else []
    decisions += ["edit", "reject"]
    return {
        "action_requests": [{"name": action, "args": args, "arguments": args,
                             "description": description}],
        "review_configs": [{"action_name": action, "allowed_decisions": decisions,
                            "args_schema": {"type": "object", "properties": {"answer": answer},
                                            "required": ["answer"]}}],
        "action_request": {"action": action, "args": args},
        "config": {"allow_ignore": declinable, "allow_respond": True, "allow_edit": True,
                   "allow_accept": bool(suggested)},
        "description": description,
    }


@dataclass(frozen=True)
class Review:
    """What a chat client's or an inbox's decision on a question means."""

    answer: Any = None
    """The answer given (checked by the graph as any answer is)."""
    declined: bool = False
    """The operator declined the question (ignore, or reject without an answer)."""
    note: str = ""
    """Why, as the operator wrote it (a reject's message)."""


def review_of(resume: Any, question: Mapping[str, Any] | None = None) -> Review | None:
    """The decision a resume value carries in one of the standard shapes, or None when it
    is a plain answer.

    ``response`` (and Agent Inbox's ``reject`` carrying the typed text as ``args``) answers
    with its text; ``edit`` with the edited ``answer`` argument; ``accept``/``approve``
    with the argument as sent, or as offered (``question``'s suggestion); ``ignore``, and
    ``reject`` with a message or nothing, decline.
    """
    decision: Any = resume
    if isinstance(resume, Mapping) and isinstance(resume.get("decisions"), list):
        decision = resume["decisions"][0] if resume["decisions"] else None
    elif isinstance(resume, list) and resume:
        decision = resume[0]
    if not isinstance(decision, Mapping) or decision.get("type") not in REVIEW_TYPES:
        return None
    kind, args = decision["type"], decision.get("args")
    if kind == "ignore" or (kind == "reject" and not isinstance(args, str)):
        return Review(declined=True, note=text_of(decision.get("message")))
    if kind in ("response", "reject"):
        return Review(answer=args)
    if kind == "edit":
        return Review(answer=_argument(decision.get("edited_action") or args))
    if args is None and question is not None:  # accepted as offered
        return Review(answer=text_of(question.get("suggested")))
    return Review(answer=_argument(args))


def _argument(action: Any) -> Any:
    """The answer an action request carries: its ``answer`` argument (or its only one)."""
    args = action.get("args", action.get("arguments")) if isinstance(action, Mapping) else action
    if isinstance(args, Mapping):
        if "answer" in args:
            return args["answer"]
        return next(iter(args.values())) if len(args) == 1 else None
    return args
