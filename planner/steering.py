"""What a run may change of its graph's model calls: the chat model, its parameters, and
the prompts its graph declares (a fork "with another model or prompt").

A graph declares its prompts as named :class:`PromptTemplate` values on its ``GraphSpec``
(``prompts``) and renders them with :func:`render_prompt`, which takes a run's override
from the run's config (``configurable["prompts"]``, as LangGraph graphs read their
settings). :func:`clean_model_settings` is the one rule every door (the fork form, /api/,
LangGraph's API) checks a request's choice with; the host builds the chosen model
(:func:`planner.llm.make_llm`).
"""

from __future__ import annotations

import math
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langgraph.config import get_config

from planner.llm import model_spec_problem

PROMPTS_KEY = "prompts"
"""The ``configurable`` key holding a run's prompt overrides, by prompt name."""

SETTINGS_KEYS = ("model", "temperature", "max_tokens", "prompts")
"""The keys of a model choice, as every door takes them."""

TEMPERATURE_RANGE = (0.0, 2.0)
MAX_TOKENS_RANGE = (1, 1_000_000)
PROMPT_LIMIT = 20_000
"""The most characters a prompt template takes."""
MODEL_LIMIT = 200


class SettingsError(ValueError):
    """A model choice a graph refuses; ``errors`` maps each bad field to what is wrong."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


@dataclass(frozen=True)
class PromptTemplate:
    """One prompt a graph sends a model, overridable by name: its text with ``{field}``
    placeholders, and the fields it is rendered with."""

    name: str
    label: str
    template: str
    fields: tuple[str, ...]
    help: str = ""

    def problem(self, text: str) -> str:
        """Why ``text`` cannot replace this template ("" when it can): too long, malformed,
        or a placeholder the graph does not fill."""
        if len(text) > PROMPT_LIMIT:
            return f"is {len(text):,} characters; the limit is {PROMPT_LIMIT:,}"
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as exc:
            return f"is not a valid template ({exc}); write a literal brace as {{{{ or }}}}"
        for _literal, name, spec, conversion in parsed:
            if name is None:
                continue
            if name not in self.fields or spec or conversion:
                return (f"has the placeholder {{{name}{'!' + conversion if conversion else ''}"
                        f"{':' + spec if spec else ''}}}; use only "
                        f"{', '.join('{' + f + '}' for f in self.fields)}")
        return ""

    def render(self, text: str | None = None, **values: Any) -> str:
        """The prompt: ``text`` (an override, checked by :meth:`problem`) or the template,
        its placeholders filled with ``values``."""
        return (text if text is not None else self.template).format_map(values)


@dataclass(frozen=True)
class ModelSettings:
    """A run's choice of model beside its graph's: the model (``PLANWATCH_LLM``'s syntax;
    "" keeps the deployment's), its temperature and answer length, and prompt overrides."""

    model: str = ""
    temperature: float | None = None
    max_tokens: int | None = None
    prompts: Mapping[str, str] = field(default_factory=dict)

    @property
    def changes_model(self) -> bool:
        """Whether the run calls another model, or the same with other parameters."""
        return bool(self.model) or self.temperature is not None or self.max_tokens is not None

    def __bool__(self) -> bool:
        return self.changes_model or bool(self.prompts)

    def as_dict(self) -> dict[str, Any]:
        """What was chosen, as stored on the run and shown (keys left out: unchanged)."""
        found: dict[str, Any] = {}
        if self.model:
            found["model"] = self.model
        if self.temperature is not None:
            found["temperature"] = self.temperature
        if self.max_tokens is not None:
            found["max_tokens"] = self.max_tokens
        if self.prompts:
            found["prompts"] = dict(self.prompts)
        return found

    @classmethod
    def stored(cls, value: Any) -> ModelSettings:
        """The settings kept on a run (checked when they were taken)."""
        if not isinstance(value, Mapping):
            return cls()
        return cls(model=str(value.get("model") or ""), temperature=value.get("temperature"),
                   max_tokens=value.get("max_tokens"),
                   prompts=dict(value.get("prompts") or {}))


def clean_model_settings(raw: Mapping[str, Any] | None, *,
                         prompts: Mapping[str, PromptTemplate], takes_model: bool,
                         graph: str = "the graph") -> ModelSettings:
    """``raw`` (``model``, ``temperature``, ``max_tokens``, ``prompts``) checked against a
    graph's declared ``prompts`` and whether it calls the model port (``takes_model``);
    ``SettingsError`` naming each bad field and what is accepted. Empty values are left
    out (``""``, null, ``{}``: unchanged)."""
    raw = raw or {}
    errors: dict[str, str] = {}
    unknown = sorted(set(raw) - set(SETTINGS_KEYS))
    if unknown:
        errors[unknown[0]] = (f"unknown setting; a fork sets {', '.join(SETTINGS_KEYS)}")
    model = _model(raw.get("model"), errors)
    temperature = _number(raw.get("temperature"), "temperature", TEMPERATURE_RANGE, errors)
    max_tokens = _number(raw.get("max_tokens"), "max_tokens", MAX_TOKENS_RANGE, errors,
                         integer=True)
    if (model or temperature is not None or max_tokens is not None) and not takes_model:
        errors.setdefault("model", f"{graph} makes its own model calls (not through "
                                   "Planwatch's model port); set its model through its own "
                                   "configurable keys")
    chosen = _prompts(raw.get("prompts"), prompts, graph, errors)
    if errors:
        raise SettingsError(errors)
    return ModelSettings(model=model, temperature=temperature,
                         max_tokens=int(max_tokens) if max_tokens is not None else None,
                         prompts=chosen)


def _model(value: Any, errors: dict[str, str]) -> str:
    if value in (None, ""):
        return ""
    if not isinstance(value, str):
        errors["model"] = f"{value!r} is not a model name; give one as 'openai:gpt-4o-mini'"
        return ""
    text = value.strip()
    problem = ("is too long" if len(text) > MODEL_LIMIT else model_spec_problem(text))
    if problem:
        errors["model"] = f"{text[:MODEL_LIMIT]!r} {problem}"
    return text


def _number(value: Any, name: str, bounds: tuple[float, float], errors: dict[str, str],
            *, integer: bool = False) -> Any:
    if value is None or value == "":
        return None
    low, high = bounds
    if isinstance(value, str):
        try:
            value = int(value) if integer else float(value)
        except ValueError:
            value = None
    kind = "a whole number" if integer else "a number"
    low_text, high_text = (f"{low:,.0f}", f"{high:,.0f}") if integer else (f"{low:g}",
                                                                          f"{high:g}")
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or (integer and isinstance(value, float) and not value.is_integer())
            or not math.isfinite(value)):
        errors[name] = f"must be {kind} from {low_text} to {high_text}"
        return None
    if not low <= value <= high:
        errors[name] = f"{value:g} is out of range; give {kind} from {low_text} to {high_text}"
        return None
    return value


def _prompts(value: Any, declared: Mapping[str, PromptTemplate], graph: str,
             errors: dict[str, str]) -> dict[str, str]:
    if value in (None, "", {}):
        return {}
    if not isinstance(value, Mapping):
        errors["prompts"] = "must be an object of prompt name to template text"
        return {}
    chosen: dict[str, str] = {}
    names = ", ".join(declared) or "(none)"
    for name, text in value.items():
        key = f"prompts.{name}"
        template = declared.get(str(name))
        if template is None:
            errors[key] = f"{graph} declares no prompt {name!r}; its prompts: {names}"
        elif not isinstance(text, str) or not text.strip():
            errors[key] = "must be the template's text"
        elif problem := template.problem(text):
            errors[key] = problem
        elif text != template.template:  # the declared text itself changes nothing
            chosen[str(name)] = text
    return chosen


def prompt_override(name: str) -> str | None:
    """The current run's override of prompt ``name`` (its config's
    ``configurable["prompts"]``), or None: outside a run, or not overridden."""
    try:
        config = get_config()
    except RuntimeError:  # called outside a runnable context
        return None
    chosen = (config.get("configurable") or {}).get(PROMPTS_KEY)
    text = chosen.get(name) if isinstance(chosen, Mapping) else None
    return text if isinstance(text, str) else None


def render_prompt(template: PromptTemplate, **values: Any) -> str:
    """The prompt ``template`` names, as the current run has it (its override, if any),
    filled with ``values``."""
    return template.render(prompt_override(template.name), **values)
