"""``PLANWATCH_TRACE_CONTENT=false``: a failed model call's error keeps no text of the
provider's message (it may quote the prompt), only the exception's class."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from langchain_core.messages import HumanMessage

from dashboard.runs.modelcalls import ContentPolicy, ModelCallRecorder

PROMPT = "the secret plan for Q3"


class Writer:
    """An event writer that keeps what it is given."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def add(self, fields: dict) -> None:
        self.events.append(fields)

    def flush_behind(self) -> None:
        pass


def failed_call(policy: ContentPolicy) -> dict:
    async def call() -> dict:
        writer = Writer()
        recorder = ModelCallRecorder(writer, prices={}, policy=policy)  # type: ignore[arg-type]
        run_id = uuid.uuid4()
        await recorder.on_chat_model_start({}, [[HumanMessage(PROMPT)]], run_id=run_id)
        await recorder.on_llm_error(ValueError(f"prompt too long: {PROMPT!r}"), run_id=run_id)
        return writer.events[-1]["payload"]

    return asyncio.run(call())


@pytest.mark.parametrize("keep", [False, True])
def test_a_failed_calls_error_keeps_the_prompt_only_when_content_is_kept(keep):
    finished = failed_call(ContentPolicy(keep=keep, limit=20_000))
    assert finished["error"].startswith("ValueError")
    assert (PROMPT in finished["error"]) is keep
