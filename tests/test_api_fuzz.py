"""Schema-driven fuzzing: schemathesis reads /api/schema/ and /langgraph/openapi.json and
calls every operation in-process.

No /api/ response may be a 5xx or disagree with the schema (status code, content type,
body), for schema-valid (positive) and schema-violating (negative) requests alike; no
/langgraph/ response may be a 5xx (its answers are LangGraph's shapes, which its document
does not describe). Examples are bounded and derandomized, so a pass takes seconds and a
failure reproduces.
"""

from __future__ import annotations

import re
import uuid

import pytest
import schemathesis
from django.contrib.auth.models import Permission
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import positive_data_acceptance

from dashboard import assistants, crons, services
from dashboard.models import Interrupt, Run, RunEvent
from tests.conftest import api_token

MAX_EXAMPLES = 10
LANGGRAPH_EXAMPLES = 5
# Operations without a parameter or body a request could break: nothing negative to send.
NOTHING_TO_NEGATE = {"GET /api/graphs/", "GET /api/graphs/{id}/"}



@pytest.fixture
def api_schema(db, operator):
    """The live schema of the in-process app (read with a token), the token, and the ids of
    what the database holds: an interrupted run with an event and a pending interrupt.

    Like Django's test client, requests must not close the test transaction's connection.
    """
    run = Run.objects.create(graph="acquisition", thread_id=f"{uuid.uuid4()}:planner",
                             state=Run.State.INTERRUPTED, created_by=operator, last_seq=1)
    RunEvent.objects.create(run=run, seq=1, kind=RunEvent.Kind.RUN_STARTED)
    interrupt = Interrupt.objects.create(run=run, interrupt_id="i-1", node="ask_user",
                                         payload={"field": "core.region"})
    known = {"/api/runs/": str(run.id), "/api/interrupts/": interrupt.pk,
             "/api/graphs/": "acquisition"}
    auth = {"Authorization": f"Token {api_token(operator)}"}
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/?format=json",
                                             get_wsgi_application(), headers=auth), auth, known
    finally:
        for signal in (request_started, request_finished):
            signal.connect(close_old_connections)


def fuzz(operation, mode: GenerationMode, auth: dict[str, str],
         path_parameters: dict[str, object] | None = None, *, examples: int = MAX_EXAMPLES,
         checks: list | None = None) -> None:
    """Call ``operation`` with bounded generated requests; raise what schemathesis finds
    (every check but ``positive_data_acceptance``, or only ``checks``)."""

    @given(case=operation.as_strategy(generation_mode=mode, path_parameters=path_parameters))
    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def call(case):
        # Schema-valid data may still be refused: a graph's input, and whether a run or an
        # interrupt exists or may change, are checked by the services, not by the schema.
        if checks is not None:
            case.call_and_validate(headers=auth, checks=checks)
        else:
            case.call_and_validate(headers=auth, excluded_checks=[positive_data_acceptance])

    call()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation_conforms_to_the_schema(api_schema, mode):
    schema, auth, known = api_schema
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 20  # every method of every path, so none is skipped silently
    failures: list[str] = []
    unsatisfiable: set[str] = set()
    for operation in operations:
        # random ids (mostly 404s), then the stored run, interrupt or graph
        existing = next((value for prefix, value in known.items()
                         if operation.path.startswith(f"{prefix}{{id}}")), None)
        for path_parameters in [None, {"id": existing}] if existing is not None else [None]:
            try:
                fuzz(operation, mode, auth, path_parameters)
            except Unsatisfiable:
                if path_parameters is None:
                    unsatisfiable.add(operation.label)
                # with the id fixed, a negative request may have nothing left to break
                elif mode != GenerationMode.NEGATIVE:
                    failures.append(f"{operation.label} {path_parameters}: unsatisfiable")
            except Exception as exc:
                failures.append(f"{operation.label} {path_parameters or ''}: {exc}")
    assert not failures, "\n\n".join(failures)
    assert unsatisfiable == (NOTHING_TO_NEGATE if mode == GenerationMode.NEGATIVE else set())


# Waiting for a run to stop (its stream, its answer): a run these requests start never
# executes here. Their bodies are the run request of POST /threads/{thread_id}/runs.
# (The document's paths are relative to its server, /langgraph, as LangGraph's server's.)
WAITS = {"POST /runs/stream", "POST /runs/wait",
         "POST /threads/{thread_id}/runs/stream",
         "POST /threads/{thread_id}/runs/wait",
         "GET /threads/{thread_id}/runs/{run_id}/join",
         "GET /threads/{thread_id}/runs/{run_id}/stream"}


@pytest.fixture
def langgraph_schema(transactional_db, executor, django_user_model):
    """/langgraph/'s document (read with a token), the token, and ids of what exists: a
    thread with a run, an assistant, a cron. The store writes on a connection of its own,
    so the test's writes are committed (``transactional_db``)."""
    user = django_user_model.objects.create_user(username="fuzz", password="pw-fuzz-12345")
    user.user_permissions.set(Permission.objects.filter(codename__in=[
        "start_run", "cancel_run", "answer_interrupt", "debug_run", "fork_run",
        "delete_run"]))
    thread = services.thread_create(user=user, graph="acquisition")
    run = Run.objects.create(graph="acquisition", thread_id=f"{uuid.uuid4()}:planner",
                             state=Run.State.SUCCEEDED, created_by=user, conversation=thread)
    assistant = assistants.assistant_create(graph_id="acquisition", user=user)
    cron = crons.cron_create(assistant_id="acquisition", schedule="0 3 * * *", user=user,
                             thread=None, payload={})
    known = {"thread_id": str(thread.id), "run_id": str(run.id),
             "assistant_id": str(assistant.id), "cron_id": str(cron.id),
             "checkpoint_id": "1", "namespace": "x"}
    auth = {"x-api-key": api_token(user)}
    yield schemathesis.openapi.from_wsgi("/langgraph/openapi.json", get_wsgi_application(),
                                         headers=auth), auth, known


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_langgraph_request_is_a_server_error(langgraph_schema, mode):
    schema, auth, known = langgraph_schema
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 47  # every method of every path, so none is skipped silently
    assert {operation.label for operation in operations} >= WAITS
    failures: list[str] = []
    # deletes last: the thread, assistant and cron they are aimed at serve the others first
    for operation in sorted(operations, key=lambda o: o.method.upper() == "DELETE"):
        # with its ids fixed, a request without a body has nothing negative to send
        if operation.label in WAITS or (mode == GenerationMode.NEGATIVE
                                        and not len(operation.body)):
            continue
        path_parameters = {name: known[name] for name in re.findall(r"{(\w+)}", operation.path)}
        try:
            fuzz(operation, mode, auth, path_parameters or None, examples=LANGGRAPH_EXAMPLES,
                 checks=[not_a_server_error])
        except Unsatisfiable:
            if mode != GenerationMode.NEGATIVE:  # a negative one may have nothing to break
                failures.append(f"{operation.label}: unsatisfiable")
        except Exception as exc:
            failures.append(f"{operation.label} {path_parameters or ''}: {exc}")
    assert not failures, "\n\n".join(failures)
