"""The operators' example script drives a field-acquisition run over the real daphne server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import requests

from dashboard.models import Interrupt, Run
from tests.conftest import ROOT, api_token

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = ROOT / "docs" / "examples" / "api_client.py"


def test_the_example_script_starts_answers_and_reads_a_run(live_server_url, operator):
    token = api_token(operator)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--url", live_server_url, "--token", token,
         "--answer", "core.region=France", "--answer", "market.price=30"],
        capture_output=True, text=True, timeout=180, check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    run = Run.objects.get(id=printed["id"])
    assert run.status == printed["status"] == Run.Status.SUCCEEDED
    assert printed["output"] == run.output
    assert run.output["region"] == "France" and run.output["currency"] == "EUR"
    assert run.output["tam"] == pytest.approx(68_400_000 * 0.15 * 30)
    answered = run.interrupts.order_by("created_at")
    assert [(i.payload["field"], i.answer) for i in answered] == [
        ("core.region", "France"), ("core.currency", "EUR"), ("market.price", 30)]
    assert {i.status for i in answered} == {Interrupt.Status.ANSWERED}
    assert {i.answered_by for i in answered} == {operator}
    assert "? " in done.stderr and "run_succeeded" in done.stderr


def test_the_live_server_refuses_a_two_megabyte_body_with_a_413(live_server_url, operator):
    token = api_token(operator)
    response = requests.post(
        f"{live_server_url}/api/runs/", timeout=30,
        headers={"Authorization": f"Token {token}"},
        json={"graph": "acquisition", "input": {"goal": "x" * (2 * 1024 * 1024)}},
    )
    assert response.status_code == 413
    assert "(DATA_UPLOAD_MAX_MEMORY_SIZE)" in response.json()["detail"]
    assert not Run.objects.exists()


def test_the_live_server_answers_anonymous_api_calls_with_401(live_server_url):
    response = requests.get(f"{live_server_url}/api/runs/", timeout=30)
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
