"""A chat model that never answers: ``PLANWATCH_LLM=tests.hanging_llm:model`` (timeouts)."""

from __future__ import annotations

import asyncio
from typing import Any


class HangingModel:
    """Accepts every call and never returns; has no structured output (asks for JSON)."""

    def __init__(self) -> None:
        self.calls = 0

    def with_structured_output(self, schema: Any) -> Any:
        raise NotImplementedError

    async def ainvoke(self, prompt: Any, config: Any = None) -> Any:
        self.calls += 1
        await asyncio.Event().wait()  # forever


def model() -> HangingModel:
    """The factory ``make_llm`` calls."""
    return HangingModel()
