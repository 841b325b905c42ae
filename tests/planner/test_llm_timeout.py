"""A model that never answers fails its call after PLANWATCH_LLM_TIMEOUT, and a run on it
ends instead of hanging."""

from __future__ import annotations

import pytest

from dashboard import services
from dashboard.models import Run, RunEvent
from planner.llm import LLMError, make_llm
from tests.conftest import assert_gapless, wait_run

pytestmark = pytest.mark.reliability


async def test_a_model_call_that_never_answers_is_an_llm_error_naming_the_limit():
    llm = make_llm("tests.hanging_llm:model", timeout=0.2)
    with pytest.raises(LLMError, match=r"plan: the model gave no answer within 0\.2 s"):
        await llm.atext(purpose="plan", prompt="hello", context={})
    assert llm.model.calls == 1  # type: ignore[attr-defined]


@pytest.mark.django_db(transaction=True)
def test_a_run_on_a_hanging_model_ends_with_the_timeout_in_its_log(executor, settings, operator):
    settings.PLANWATCH = {**settings.PLANWATCH, "LLM": "tests.hanging_llm:model",
                          "LLM_TIMEOUT": 0.2}
    run = services.run_create(graph="decomposition", input={"goal": "Plan a party"},
                              user=operator)
    run = wait_run(run.id, statuses=("succeeded", "failed", "cancelled", "interrupted"),
                   timeout=60)
    events = assert_gapless(run)
    said = " ".join(str(e.payload) for e in events) + run.error_message
    assert "no answer within 0.2 s" in said
    assert run.status != Run.Status.RUNNING
    assert RunEvent.Kind.RUN_STARTED in [e.kind for e in events]
