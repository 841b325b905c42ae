"""The LLM port: a scripted offline model by default, any LangChain chat model on demand.

Graphs call the port with a ``purpose`` (``"acquisition.decide"``, ``"decomposition.plan"``
…), a prompt for real models, and a ``context`` of plain facts from which the scripted
model derives its deterministic answer. Graph packages register their scripted answers
with :func:`scripted_responder`, so this module knows no graph.

A port's call is the graph's own reasoning (a plan, a decision, a synthesis), never what a
chat client's user reads: the graph writes that to its transcript (``planner.chat``). So
every call is tagged :data:`INTERNAL_TAGS`, which keep its chunks out of LangGraph's
``messages`` stream, on LangGraph's server as on Planwatch's.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.base import LangSmithParams
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, ConfigDict, ValidationError

M = TypeVar("M", bound=BaseModel)

Responder = Callable[[Mapping[str, Any]], Any]
"""A scripted answer: context -> dict (structured calls) or str (text calls)."""

_RESPONDERS: dict[str, Responder] = {}

PURPOSE_METADATA = "planwatch_purpose"
"""The metadata key naming a model call's purpose (``"acquisition.decide"``) for whoever
listens to LangChain's callbacks (Planwatch's trace records it with the call)."""


INTERNAL_TAGS = ("nostream", "langsmith:nostream")
"""The tags of a call a chat client is not shown as it streams: LangGraph's ``TAG_NOSTREAM``
(``nostream``) and the name Agent Chat UI documents (``langsmith:nostream``)."""


def purpose_config(purpose: str) -> RunnableConfig:
    """The config a port's call is made with: its purpose in the callbacks' metadata, and
    tagged internal (:data:`INTERNAL_TAGS`): its chunks are not streamed to chat clients."""
    return {"metadata": {PURPOSE_METADATA: purpose}, "tags": list(INTERNAL_TAGS)}


class LLMError(Exception):
    """The model failed or answered something that does not fit the requested shape."""


class LLMPort(Protocol):
    """What a planner graph needs from a language model."""

    async def astructured(
        self, *, purpose: str, prompt: str, schema: type[M], context: Mapping[str, Any]
    ) -> M:
        """Return one answer validated against ``schema``; raise ``LLMError`` otherwise."""
        ...

    async def atext(self, *, purpose: str, prompt: str, context: Mapping[str, Any]) -> str:
        """Return free text (a plan in XML or JSON, a synthesis …); raise ``LLMError``."""
        ...


def scripted_responder(purpose: str) -> Callable[[Responder], Responder]:
    """Register the scripted model's answer for ``purpose`` (used by graph packages)."""

    def decorate(fn: Responder) -> Responder:
        _RESPONDERS[purpose] = fn
        return fn

    return decorate


class ScriptedLLM:
    """A deterministic offline model: answers come from the graphs' scripted responders.

    ``think_time`` (seconds) makes live runs watchable; ``fail`` and ``malformed`` name
    purposes that raise or return unparseable output, for tests; ``overrides`` replaces a
    purpose's responder (a callable, or a fixed value returned every time).
    """

    def __init__(
        self,
        *,
        think_time: float = 0.0,
        fail: frozenset[str] | set[str] | tuple[str, ...] = (),
        malformed: frozenset[str] | set[str] | tuple[str, ...] = (),
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self.think_time = think_time
        self.fail = frozenset(fail)
        self.malformed = frozenset(malformed)
        self.overrides = dict(overrides or {})
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.chat = ScriptedChatModel(script=self)
        """The same model as a LangChain chat model, which every call goes through."""

    async def _answer(self, purpose: str, context: Mapping[str, Any]) -> Any:
        self.calls.append((purpose, dict(context)))
        if self.think_time:
            await asyncio.sleep(self.think_time)
        if purpose in self.fail:
            raise LLMError(f"scripted failure for {purpose!r}")
        if purpose in self.malformed:
            return "<<not valid output>>"
        responder = self.overrides.get(purpose, _RESPONDERS.get(purpose))
        if responder is None:
            known = ", ".join(sorted(_RESPONDERS)) or "(none)"
            raise LLMError(f"no scripted answer for {purpose!r}; scripted purposes: {known}")
        return responder(context) if callable(responder) else responder

    async def _acall(self, purpose: str, prompt: str, context: Mapping[str, Any]) -> Any:
        """Answer through :class:`ScriptedChatModel`, so callbacks see the call as any other."""
        message = await self.chat.ainvoke(
            prompt, config=purpose_config(purpose), purpose=purpose, context=context)
        return message.additional_kwargs.get("parsed", message.content)

    async def astructured(
        self, *, purpose: str, prompt: str, schema: type[M], context: Mapping[str, Any]
    ) -> M:
        """Validate the scripted answer for ``purpose`` against ``schema``."""
        raw = await self._acall(purpose, prompt, context)
        try:
            if isinstance(raw, str):
                return schema.model_validate_json(raw)
            return schema.model_validate(raw)
        except ValidationError as exc:
            raise LLMError(f"{purpose}: answer does not fit {schema.__name__}: {exc}") from exc

    async def atext(self, *, purpose: str, prompt: str, context: Mapping[str, Any]) -> str:
        """Return the scripted text for ``purpose`` (dicts are serialised as JSON)."""
        raw = await self._acall(purpose, prompt, context)
        return raw if isinstance(raw, str) else json.dumps(raw)


class ScriptedChatModel(BaseChatModel):
    """The scripted model as a LangChain chat model (async only): the prompt goes in, the
    scripted answer for the call's ``purpose`` and ``context`` comes out as the message
    text (a structured answer also as ``additional_kwargs["parsed"]``); no usage."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    script: ScriptedLLM

    @property
    def _llm_type(self) -> str:
        return "planwatch-scripted"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        return LangSmithParams(ls_provider="planwatch", ls_model_name="scripted",
                               ls_model_type="chat")

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  **kwargs: Any) -> ChatResult:
        raise NotImplementedError("the scripted model answers async calls only (ainvoke)")

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None,
                         **kwargs: Any) -> ChatResult:
        raw = await self.script._answer(kwargs["purpose"], kwargs["context"])
        message = AIMessage(
            content=raw if isinstance(raw, str) else json.dumps(raw),
            additional_kwargs={} if isinstance(raw, str) else {"parsed": raw},
            response_metadata={"model_name": "scripted"})
        return ChatResult(generations=[ChatGeneration(message=message)])


class LangChainLLM:
    """Adapter over any LangChain chat model (``with_structured_output`` for structure)."""

    def __init__(self, model: Any, *, timeout: float | None = None) -> None:
        self.model = model
        self.timeout = timeout
        """Seconds a call may take; then it fails with ``LLMError`` (None: no limit)."""

    async def _call(self, purpose: str, call: Any) -> Any:
        """Await one model call within :attr:`timeout`; every failure is an ``LLMError``."""
        try:
            return await asyncio.wait_for(call, self.timeout)
        except TimeoutError:
            raise LLMError(f"{purpose}: the model gave no answer within {self.timeout:g} s "
                           "(PLANWATCH_LLM_TIMEOUT)") from None
        except Exception as exc:  # a provider can raise anything; the graph needs one type
            raise LLMError(f"{purpose}: model call failed: {exc}") from exc

    async def astructured(
        self, *, purpose: str, prompt: str, schema: type[M], context: Mapping[str, Any]
    ) -> M:
        """One structured call; any model or validation failure becomes ``LLMError``.

        Models without ``with_structured_output`` (no tool calling) are asked for a JSON
        object matching the schema instead, and the reply is parsed.
        """
        try:
            structured = self.model.with_structured_output(schema)
        except NotImplementedError:
            return await self._ajson(purpose=purpose, prompt=prompt, schema=schema)
        result = await self._call(purpose, structured.ainvoke(prompt,
                                                              config=purpose_config(purpose)))
        if isinstance(result, schema):
            return result
        try:
            return schema.model_validate(result)
        except ValidationError as exc:
            raise LLMError(f"{purpose}: answer does not fit {schema.__name__}: {exc}") from exc

    async def _ajson(self, *, purpose: str, prompt: str, schema: type[M]) -> M:
        """Structured output by instruction: ask for JSON, parse the reply, validate it."""
        instruction = (
            f"{prompt}\n\nAnswer with only one JSON object that matches this JSON schema:\n"
            f"{json.dumps(schema.model_json_schema())}"
        )
        text = await self.atext(purpose=purpose, prompt=instruction, context={})
        body = text.strip()
        if body.startswith("```"):  # a fenced reply: keep what is inside the fence
            body = body.split("\n", 1)[-1].rsplit("```", 1)[0]
        try:
            return schema.model_validate_json(body)
        except ValidationError as exc:
            raise LLMError(f"{purpose}: answer does not fit {schema.__name__}: {exc}") from exc

    async def atext(self, *, purpose: str, prompt: str, context: Mapping[str, Any]) -> str:
        """One plain call returning the message text."""
        message = await self._call(purpose, self.model.ainvoke(prompt,
                                                               config=purpose_config(purpose)))
        content = message.content
        if isinstance(content, list):  # content blocks
            content = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
        return str(content)


def _providers() -> Mapping[str, tuple[Any, ...]]:
    """The providers ``init_chat_model`` knows: name -> (module, class, …)."""
    from langchain.chat_models.base import _BUILTIN_PROVIDERS

    return _BUILTIN_PROVIDERS


def model_spec_problem(spec: str) -> str:
    """Why ``spec`` names no model a run may choose ("" when it does): ``"scripted"``, or a
    provider's model by name (``"openai:gpt-4o-mini"``) whose LangChain package is
    installed. (A ``package.module:factory`` is the deployment's to set, in
    ``PLANWATCH_LLM``, never a request's: it would import what the request names.)"""
    if spec == "scripted":
        return ""
    provider, sep, model = spec.partition(":")
    if not sep or not provider or not model.strip():
        return ("is no model; use 'scripted' or 'provider:model' (openai:gpt-4o-mini, "
                "anthropic:claude-sonnet-4-5, ollama:llama3)")
    providers = _providers()
    known = providers.get(provider)
    if known is None:
        return (f"names no provider {provider!r}; use one of: "
                f"{', '.join(sorted(providers))}")
    package = known[0].split(".")[0]
    if importlib.util.find_spec(package) is None:
        return (f"needs the package {package.replace('_', '-')}, which is not installed "
                "here; install it, or choose another provider")
    return ""


def make_llm(spec: str = "scripted", *, think_time: float = 0.0,
             timeout: float | None = None, base_url: str = "",
             temperature: float | None = None, max_tokens: int | None = None) -> LLMPort:
    """Build the configured model: ``"scripted"``, a provider's model by name
    (``"openai:gpt-4o-mini"``, ``"anthropic:claude-sonnet-4-5"``, ``"ollama:llama3"``: any
    provider LangChain's ``init_chat_model`` knows, its key from the provider's usual
    variable, ``base_url`` for an OpenAI-compatible server) or ``"package.module:factory"``.

    A factory is called with no arguments and must return a LangChain chat model; each
    call of the model fails with ``LLMError`` after ``timeout`` seconds. ``temperature``
    and ``max_tokens`` (None: the model's own) set its parameters; the scripted model has
    none.
    """
    if spec in ("", "scripted"):
        return ScriptedLLM(think_time=think_time)
    params = {k: v for k, v in (("temperature", temperature), ("max_tokens", max_tokens))
              if v is not None}
    left, sep, right = spec.partition(":")
    if not sep or not left or not right:
        raise ValueError(
            f"unsupported LLM setting {spec!r}; use 'scripted', 'provider:model' "
            "(openai:gpt-4o-mini) or 'package.module:factory'")
    factory = _factory(left, right)
    if factory is not None:
        return LangChainLLM(_with_params(factory(), params), timeout=timeout)
    return LangChainLLM(_provider_model(left, right, base_url, params), timeout=timeout)


def _with_params(model: Any, params: Mapping[str, Any]) -> Any:
    """A factory's model with ``params`` set, on a copy (each a field the model has)."""
    fields = getattr(type(model), "model_fields", {})
    unknown = sorted(set(params) - set(fields))
    if unknown:
        raise ValueError(f"the model {type(model).__name__} has no {', '.join(unknown)}")
    return model.model_copy(update=dict(params)) if params else model


def _factory(module_name: str, attr: str) -> Any:
    """The factory ``module_name:attr`` names, or None when the setting names a provider's
    model instead (``openai:gpt-4o-mini``: no such attribute, or no such module)."""
    if not attr.isidentifier() or module_name in _providers():
        return None  # a provider's model: "openai:chat" is not the openai package's chat
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        if "." in module_name:
            raise
        return None
    return getattr(module, attr, None)


def _provider_model(provider: str, model: str, base_url: str,
                    params: Mapping[str, Any]) -> Any:
    """``init_chat_model``'s model, its errors saying which setting to change."""
    from langchain.chat_models import init_chat_model

    extra: dict[str, Any] = {"base_url": base_url} if base_url else {}
    extra.update(params)
    try:
        return init_chat_model(model, model_provider=provider, **extra)
    except ImportError as exc:
        raise ValueError(f"PLANWATCH_LLM {provider}:{model}: {exc}") from exc
    except ValueError as exc:
        raise ValueError(f"unsupported LLM setting '{provider}:{model}': {exc}; use "
                         "'scripted', 'provider:model' or 'package.module:factory'") from exc
