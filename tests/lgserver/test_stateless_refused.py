"""A refused stateless run leaves no thread behind (each refusal made one before)."""

from __future__ import annotations

import pytest

from dashboard.models import Run, Thread
from tests.conftest import api_token

pytestmark = [pytest.mark.slow, pytest.mark.pg, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("path", ["/langgraph/runs", "/langgraph/runs/wait",
                                  "/langgraph/runs/stream"])
def test_a_stateless_run_refused_past_the_queue_limit_leaves_no_thread(
        client, operator, settings, path):
    settings.PLANWATCH = {**settings.PLANWATCH, "MAX_QUEUED_RUNS_PER_USER": 0}
    headers = {"x-api-key": api_token(operator)}
    for _ in range(3):
        refused = client.post(path, {"assistant_id": "acquisition", "input": {
            "region": "Germany", "currency": "EUR"}}, content_type="application/json",
            headers=headers)
        assert refused.status_code == 429, refused.content[:300]
    assert Thread.objects.count() == 0 and Run.objects.count() == 0
