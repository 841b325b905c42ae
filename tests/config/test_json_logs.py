"""PLANWATCH_LOG_FORMAT=json: one JSON line per request and per run transition, with the
run id."""

from __future__ import annotations

import json
import logging
import uuid

import pytest

from config.jsonlog import JsonFormatter
from dashboard import services
from dashboard.web.accesslog import RedactingServer
from tests.conftest import wait_run


def lines(caplog, logger: str) -> list[dict]:
    """The records of ``logger`` as the JSON formatter writes them, parsed back."""
    return [json.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == logger]


def test_each_transition_of_a_run_is_one_json_line_with_its_id(executor, operator, caplog):
    with caplog.at_level(logging.INFO, logger="planwatch.transitions"):
        run = wait_run(services.run_create(graph="test.echo", input={"steps": 2},
                                           user=operator).id, statuses=("succeeded",))
    mine = [line for line in lines(caplog, "planwatch.transitions")
            if line["run_id"] == str(run.id)]
    assert [line["status"] for line in mine] == ["running", "succeeded"]
    assert mine[0]["graph"] == "test.echo" and mine[0]["owner"] == executor.owner
    assert mine[-1]["message"] == f"run {run.id} succeeded" and mine[-1]["level"] == "INFO"


def test_a_request_is_one_json_line_with_the_run_it_names(settings, caplog):
    settings.LOG_FORMAT = "json"
    run_id = uuid.uuid4()
    server = object.__new__(RedactingServer)  # only its log_action is asked
    server.action_logger = None
    with caplog.at_level(logging.INFO, logger="planwatch.requests"):
        server.log_action("http", "complete", {
            "path": f"/langgraph/threads/t/runs/{run_id}/stream?api_key=secret",
            "status": 200, "method": "GET", "client": "10.0.0.1:5000", "size": 123})
    (line,) = lines(caplog, "planwatch.requests")
    assert line["run_id"] == str(run_id) and line["status"] == 200
    assert line["method"] == "GET" and "secret" not in json.dumps(line)


@pytest.mark.parametrize("fmt", ["plain", "json"])
def test_the_request_and_transition_records_are_kept_only_in_json(fmt, monkeypatch):
    import importlib

    import config.settings as module

    monkeypatch.setenv("PLANWATCH_LOG_FORMAT", fmt)
    fresh = importlib.reload(module)
    try:
        assert fresh.LOGGING["handlers"]["console"]["formatter"] == fmt
        assert fresh.LOGGING["loggers"]["planwatch.transitions"]["level"] == (
            "INFO" if fmt == "json" else "WARNING")
    finally:
        monkeypatch.delenv("PLANWATCH_LOG_FORMAT")
        importlib.reload(module)
