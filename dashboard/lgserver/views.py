"""The endpoints of LangGraph's server API that Planwatch serves (see ``urls``).

Each view parses the request, checks the permission its action needs (the same ones as
the pages and the REST API), calls the run service (through ``threads`` for runs) and
shapes the answer as LangGraph's server does. Errors are JSON ``{"detail": …}``: 401 with
no key, 403 without the permission, 404 for an unknown id, 409 for a busy or finished
thread or run, 422 for a request that does not fit, naming the field and the way out.
Waiting (``wait``, ``join``) and streaming happen in the response's async iterator, on the
server's event loop, never in a request thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator, Mapping
from importlib.metadata import version
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.db import IntegrityError, connections, transaction
from django.http import StreamingHttpResponse
from rest_framework import exceptions
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from config.dberrors import retried
from dashboard import assistants, policy, services
from dashboard.api.exceptions import exception_handler as api_exception_handler
from dashboard.checkpoints import compiled
from dashboard.lgserver import bodies, refusals, search, shapes, stream
from dashboard.lgserver.auth import ApiKeyAuthentication
from dashboard.lgserver.openapi import LangGraphSchema
from dashboard.limits import SlottedStream, StreamSlot, stream_slot_take
from dashboard.models import LangGraphRun, Run, Thread
from dashboard.services import RunStateError, ServiceError
from dashboard.thread_runs import (
    Command,
    CommandKind,
    RunRequest,
    Started,
    creates_runs,
    locked,
    start,
    written,
)
from planner.registry import GraphSpec
from planner.spec import InputError
from planner.steering import SETTINGS_KEYS, SettingsError

VERSION = "0.1"


def lg_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """The REST API's handler, with LangGraph's codes: 422 for bad input, 409 for state."""
    response = api_exception_handler(exc, context)
    if response is None:
        return None
    refused_input = isinstance(exc, ServiceError) and not isinstance(
        exc, RunStateError | services.InterruptClosed | services.LimitReached
        | services.AnswerForbidden)
    if refused_input or isinstance(exc, exceptions.ValidationError):
        response.status_code = 422
    return response


class EventStreamRenderer(JSONRenderer):
    """Lets a client that accepts only ``text/event-stream`` in: the stream views answer
    with their own response, and an error before the stream starts is JSON."""

    media_type = "text/event-stream"


class LangGraphView(APIView):
    """Base: ``x-api-key`` (or the REST API's token, or a session), JSON, LangGraph errors."""

    authentication_classes = [ApiKeyAuthentication, *APIView.authentication_classes]
    renderer_classes = [JSONRenderer, EventStreamRenderer]
    # its own document, /langgraph/openapi.json, not Planwatch's /api/schema/
    schema = LangGraphSchema()
    request_shapes: dict[str, type[Serializer]] = {}
    """The declared shape of each method's body (``{"post": bodies.RunBody}``): what
    :func:`body` parses it with and what the OpenAPI document says it takes."""

    def get_exception_handler(self) -> Callable[..., Response | None]:
        return lg_exception_handler

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        """Authenticate, then refuse a thread or assistant the user may not see with the
        404 of an unknown one (:mod:`dashboard.policy`: their own, or all for the team)."""
        super().initial(request, *args, **kwargs)
        if policy.is_team(request.user):
            return
        if "thread_id" in kwargs:
            try:
                wanted = uuid.UUID(str(kwargs["thread_id"]))
            except ValueError:
                return  # the view answers an id that is not a UUID
            row = Thread.objects.filter(id=wanted).first()
            if row is not None and not policy.may_read(request.user, row.created_by_id):
                raise exceptions.NotFound(f"no thread {wanted}; create it with POST /threads")
            # kept for the view (thread_seen): one read of the thread a request
            request._planwatch_thread = (kwargs["thread_id"], row)  # type: ignore[attr-defined]
        if "assistant_id" in kwargs:
            visible(request, resolve(kwargs["assistant_id"]), kwargs["assistant_id"])


def require(request: Request, perm: str, what: str) -> None:
    """403 naming the permission unless the user holds it."""
    if not request.user.has_perm(f"dashboard.{perm}"):
        raise exceptions.PermissionDenied(
            f"{what} needs the 'dashboard.{perm}' permission; ask an administrator to grant it")


def body(request: Request) -> dict[str, Any]:
    """The JSON object sent (``{}`` for none), bounded by the one JSON parser
    (:mod:`dashboard.api.parsers`), then checked and converted by the shape its view
    declares for the method (``request_shapes``, :mod:`~dashboard.lgserver.bodies`);
    422 naming the bad field. Parsed once a request, however often a view asks."""
    parsed: dict[str, Any] | None = getattr(request, "_planwatch_body", None)
    if parsed is not None:
        return parsed
    data = request.data if request.data not in (None, "") else {}
    if not isinstance(data, dict):
        raise exceptions.ValidationError({"body": "send a JSON object"})
    view = (request.parser_context or {}).get("view")
    shape = getattr(view, "request_shapes", {}).get(str(request.method).lower())
    if shape is not None:
        data = bodies.parse(data, shape)
    if "webhook" in data and data["webhook"] is not None:
        raise exceptions.ValidationError({"webhook": (
            "webhooks are not served by Planwatch; follow the run with runs.join or "
            "runs.join_stream instead")})
    request._planwatch_body = data  # type: ignore[attr-defined]
    return data


def spec_of(assistant_id: Any) -> GraphSpec:
    """The graph an assistant (or graph) id names; 404 listing the known ones."""
    return resolve(assistant_id).spec


def visible(request: Request, resolved: assistants.Resolved, assistant_id: Any
            ) -> assistants.Resolved:
    """``resolved``, or the 404 of an unknown assistant for a created one the user may not
    read (a graph's own assistant is everyone's)."""
    row = resolved.assistant
    if row is not None and not policy.may_read(request.user, row.created_by_id):
        raise exceptions.NotFound(f"no assistant {assistant_id}; list them with POST "
                                  "/assistants/search")
    return resolved


def resolve(assistant_id: Any) -> assistants.Resolved:
    """The graph and assistant an id names; 404 listing the known graphs."""
    try:
        return assistants.assistant_resolve(assistant_id=assistant_id)
    except assistants.AssistantNotFound as exc:
        raise exceptions.NotFound(str(exc)) from None


def thread_of(thread_id: Any) -> Thread:
    """The thread, or 404 (also for an id that is not a UUID)."""
    try:
        return Thread.objects.get(id=uuid.UUID(str(thread_id)))
    except (ValueError, Thread.DoesNotExist):
        raise _no_thread(thread_id) from None


def thread_seen(request: Request, thread_id: Any) -> Thread:
    """:func:`thread_of`, as the door read it for ``request`` (:meth:`LangGraphView.initial`,
    for one who is not of the team) if it did, else read now."""
    kept = getattr(request, "_planwatch_thread", None)
    if kept is None or kept[0] != thread_id:
        return thread_of(thread_id)
    if kept[1] is None:
        raise _no_thread(thread_id)
    thread: Thread = kept[1]
    return thread


def _no_thread(thread_id: Any) -> exceptions.NotFound:
    """The 404 of a thread id no thread has."""
    return exceptions.NotFound(f"thread {thread_id} not found (no thread has that id); "
                               "create it with POST /threads")


def run_of(thread: Thread, run_id: Any) -> LangGraphRun:
    """The thread's LangGraph run (with its ``Run``), or 404."""
    try:
        return LangGraphRun.objects.select_related("run").get(
            id=uuid.UUID(str(run_id)), run__conversation=thread)
    except (ValueError, LangGraphRun.DoesNotExist):
        raise exceptions.NotFound(f"run {run_id} not found: thread {thread.id} has no such "
                                  "run") from None


def _str_list(data: dict[str, Any], key: str) -> list[str]:
    value = data.get(key)
    if value in (None, ""):
        return []
    if value == "*":
        return ["*"]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise exceptions.ValidationError({key: 'a list of node names, or "*"'})


def _modes(value: Any) -> list[str]:
    modes = [value] if isinstance(value, str) else list(value or ["values"])
    unknown = [m for m in modes if m not in stream.MODES]
    if unknown:
        raise exceptions.ValidationError(
            {"stream_mode": f"unknown {unknown}; use {', '.join(stream.MODES)}"})
    return modes


def object_of(data: dict[str, Any], key: str) -> dict[str, Any]:
    """``data[key]``, a JSON object (``{}`` when absent), or a 422 naming the key."""
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise exceptions.ValidationError({key: "a JSON object"})
    return value


def limit_of(data: Any, default: int = 10) -> int:
    """A search's ``limit``: 1 to 1000 (``default`` when not sent), or a 422 naming it."""
    try:
        return max(1, min(int(data.get("limit") or default), 1000))
    except (TypeError, ValueError, OverflowError):
        raise exceptions.ValidationError({"limit": "a whole number from 1 to 1000"}) from None


def sort_of(data: Any, sortable: Mapping[str, str]) -> tuple[str, str]:
    """A search's ``sort_by`` and ``sort_order`` (``created_at``, ``desc`` when not sent);
    422 naming either when it is not one of ``sortable``'s keys, or asc or desc."""
    sort_by = str(data.get("sort_by") or "created_at")
    order = str(data.get("sort_order") or "desc")
    if sort_by not in sortable:
        raise exceptions.ValidationError(
            {"sort_by": f"{sort_by!r}; use one of {', '.join(sortable)}"})
    if order not in ("asc", "desc"):
        raise exceptions.ValidationError({"sort_order": f"{order!r}; use asc or desc"})
    return sort_by, order


def order_of(data: Any, sortable: Mapping[str, str]) -> tuple[str, str]:
    """The ``order_by`` of a search's :func:`sort_of`, its id last (a stable order)."""
    sort_by, order = sort_of(data, sortable)
    prefix = "-" if order == "desc" else ""
    return f"{prefix}{sortable[sort_by]}", f"{prefix}id"


def offset_of(data: Any) -> int:
    """A search's ``offset``: 0 up to ``PLANWATCH_MAX_SEARCH_OFFSET``, or a 422 naming it."""
    deepest = search.max_offset()
    try:
        offset = max(0, int(data.get("offset") or 0))
    except (TypeError, ValueError, OverflowError):
        raise exceptions.ValidationError({"offset": "a whole number"}) from None
    if offset > deepest:
        raise exceptions.ValidationError({"offset": (
            f"{offset} is past the deepest page ({deepest}, PLANWATCH_MAX_SEARCH_OFFSET); "
            "narrow the search with metadata or status instead")})
    return offset


# -- info, assistants -----------------------------------------------------------------


class InfoView(LangGraphView):
    """``GET /info``: what this server is and serves (open to any signed-in client)."""

    def get(self, request: Request) -> Response:
        return Response({"version": VERSION, "langgraph_py_version": _langgraph_version(),
                         "flags": {"assistants": True, "crons": True, "langsmith": False,
                                   "store": True},
                         "host": {"kind": "planwatch"}})


def _langgraph_version() -> str:
    return version("langgraph")


class AssistantGraphView(LangGraphView):
    """``GET /assistants/<id>/graph``: the nodes and edges LangGraph draws."""

    def get(self, request: Request, assistant_id: str) -> Response:
        spec = spec_of(assistant_id)
        xray = request.query_params.get("xray") in ("true", "1")
        drawing = compiled(spec.name).get_graph(xray=xray).to_json()
        return Response(drawing)


class AssistantSchemasView(LangGraphView):
    """``GET /assistants/<id>/schemas``: the input schema is what the start form takes."""

    def get(self, request: Request, assistant_id: str) -> Response:
        spec = spec_of(assistant_id)
        graph = compiled(spec.name)
        return Response({
            "graph_id": spec.name,
            "input_schema": spec.input_json_schema(),
            "output_schema": _schema(graph.get_output_jsonschema),
            "state_schema": _schema(graph.get_input_jsonschema),
            # a run's config is not passed to the graph (its thread is Planwatch's to set)
            "config_schema": {"title": "Config", "type": "object", "properties": {}},
            "context_schema": _schema(graph.get_context_jsonschema),
        })


def _schema(make: Callable[[], Any]) -> Any:
    try:
        return make()
    except Exception:  # a schema LangGraph cannot describe
        return None


# -- threads ----------------------------------------------------------------------------


class ThreadsView(LangGraphView):
    """``POST /threads``: a new thread (``if_exists``: raise, or do_nothing)."""

    request_shapes = {"post": bodies.ThreadBody}

    def post(self, request: Request) -> Response:
        require(request, "start_run", "creating a thread")
        data = body(request)
        metadata = object_of(data, "metadata")
        wanted = data.get("thread_id")
        if wanted:
            try:
                thread_id = uuid.UUID(str(wanted))
            except ValueError:
                raise exceptions.ValidationError({"thread_id": "a UUID"}) from None
            existing = Thread.objects.filter(id=thread_id).first()
            if existing is not None:
                mine = search.visible_threads(request.user).filter(id=thread_id).exists()
                if data.get("if_exists") == "do_nothing" and mine:
                    return Response(shapes.thread(existing))
                return Response({"detail": f"thread {thread_id} exists; send "
                                 "if_exists='do_nothing' to get it"}, status=409)
        else:
            thread_id = uuid.uuid4()
        thread = services.thread_create(user=request.user, thread_id=thread_id,
                                        metadata=metadata,
                                        graph=str(metadata.get("graph_id") or ""))
        return Response(shapes.thread(thread, current={}))  # new: no run, no state to read


class ThreadSearchView(LangGraphView):
    """``POST /threads/search``: by metadata, status, ids; sorted (newest first unless
    ``sort_by``/``sort_order``, or Aegra's ``order_by``, say otherwise); paged in SQL."""

    request_shapes = {"post": bodies.ThreadSearchBody}

    def post(self, request: Request) -> Response:
        data = body(request)
        threads = search.metadata_match(search.visible_threads(request.user),
                                        object_of(data, "metadata"))
        if data.get("ids"):
            ids = data["ids"] if isinstance(data["ids"], list) else []
            try:
                threads = threads.filter(id__in=[uuid.UUID(str(i)) for i in ids])
            except ValueError:
                raise exceptions.ValidationError({"ids": "a list of thread UUIDs"}) from None
        status = data.get("status")
        if status:
            if status not in search.THREAD_STATUSES:
                raise exceptions.ValidationError({"status": (
                    f"{status!r} is not one of {', '.join(search.THREAD_STATUSES)}")})
            threads = threads.filter(status=status)
        ordered = threads.order_by(*order_of(search.with_order_by(data),
                                             search.THREAD_SORTABLE))
        offset, limit = offset_of(data), limit_of(data)
        page = ordered[offset: offset + limit]
        return Response(shapes.threads(list(page)))


class ThreadView(LangGraphView):
    """``GET``, ``PATCH`` (metadata) and ``DELETE`` ``/threads/<id>``."""

    request_shapes = {"patch": bodies.ThreadBody}

    def get(self, request: Request, thread_id: str) -> Response:
        return Response(shapes.thread(thread_of(thread_id)))

    def patch(self, request: Request, thread_id: str) -> Response:
        require(request, "start_run", "changing a thread's metadata")
        thread = services.thread_update(thread=thread_of(thread_id),
                                        metadata=object_of(body(request),
                                                       "metadata"))
        return Response(shapes.thread(thread))

    def delete(self, request: Request, thread_id: str) -> Response:
        require(request, "delete_run", "deleting a thread and its runs")
        thread = thread_of(thread_id)
        busy = list(Run.objects.busy().filter(conversation=thread))
        if not busy:
            services.thread_delete(thread=thread)
            return Response(status=204)
        # as LangGraph's server: its runs in flight are cancelled, then it is deleted (once
        # they stopped: cancel.thread waits on the loop, never in a request thread)
        require(request, "cancel_run", "deleting a thread whose runs are in flight")
        for run in busy:
            with contextlib.suppress(RunStateError):  # it stopped meanwhile
                services.run_cancel(run=run, user=request.user, reason=(
                    f"its thread {thread.id} was deleted by a LangGraph client"))
        response = Response(status=202)
        response.planwatch_delete = (thread, [r.id for r in busy])  # type: ignore[attr-defined]
        return response


class ThreadHistoryView(LangGraphView):
    """``GET`` or ``POST /threads/<id>/history``: past states, newest first."""

    request_shapes = {"post": bodies.HistoryBody}

    def get(self, request: Request, thread_id: str) -> Response:
        return self._history(thread_id, request.query_params)

    def post(self, request: Request, thread_id: str) -> Response:
        return self._history(thread_id, body(request))

    def _history(self, thread_id: str, data: Any) -> Response:
        thread = thread_of(thread_id)
        before = data.get("before")
        before_id = before.get("checkpoint_id") if isinstance(before, dict) else before
        checkpoint = data.get("checkpoint")
        checkpoint_id = checkpoint.get("checkpoint_id") if isinstance(checkpoint, dict) \
            else None
        return Response(shapes.history(thread, limit=limit_of(data), before=before_id,
                                       checkpoint_id=checkpoint_id))


# -- runs -------------------------------------------------------------------------------


def run_request(request: Request, data: dict[str, Any]) -> RunRequest:
    """Parse a run request and check the permissions its parts need."""
    if "assistant_id" not in data:
        raise exceptions.ValidationError({"assistant_id": "required: the graph to run"})
    if data.get("after_seconds") not in (None, 0):  # see the README's table of fields
        raise exceptions.ValidationError({"after_seconds": (
            "a delayed start is not served by Planwatch (the run would start now); send "
            "the request when the run is due, or schedule it with a cron (POST /runs/crons)")})
    resolved = visible(request, resolve(data["assistant_id"]), data["assistant_id"])
    spec = resolved.spec
    command = Command.parse(data.get("command"))  # here only: it is a typed value after
    # with both, the command wins, as on LangGraph's server (Agent Chat UI answers an
    # interrupt with input {} beside command.resume)
    run_input = None if command is not None else data.get("input")
    checkpoint = data.get("checkpoint")
    checkpoint_id = data.get("checkpoint_id") or (
        checkpoint.get("checkpoint_id") if isinstance(checkpoint, dict) else None) or ""
    config = object_of(data, "config")
    configurable = config.get("configurable") or {}
    if not isinstance(configurable, dict):
        raise exceptions.ValidationError({"config.configurable": "a JSON object"})
    context = data.get("context")
    if context is not None and not isinstance(context, dict):
        raise exceptions.ValidationError({"context": "a JSON object (the graph's context)"})
    # the assistant's config and context, with the request's values winning
    configurable = {**(resolved.config.get("configurable") or {}), **configurable}
    context = {**resolved.context, **(context or {})}  # {}: the context schema's defaults
    limit = config.get("recursion_limit", resolved.config.get("recursion_limit"))
    if limit is not None and (why := refusals.recursion_limit(limit)):
        raise exceptions.ValidationError({"config.recursion_limit": why})
    if why := refusals.reserved_config({**config, "configurable": configurable}):
        raise exceptions.ValidationError({"config.configurable": why})
    settings = _model_settings(spec, configurable)
    if isinstance(run_input, dict):
        try:
            run_input = dict(spec.chat_input(run_input))
        except InputError as exc:
            raise exceptions.ValidationError(exc.errors) from None
    req = RunRequest(
        assistant_id=spec.name, configurable=configurable, context=context,
        **assistants.run_assistant_fields(resolved),
        input=run_input, command=command,
        checkpoint_id=str(checkpoint_id), metadata=object_of(data, "metadata"),
        interrupt_before=_str_list(data, "interrupt_before"),
        interrupt_after=_str_list(data, "interrupt_after"),
        # enqueue unless asked otherwise, as LangGraph's server (models/run.py)
        multitask_strategy=str(data.get("multitask_strategy") or "enqueue"),
        recursion_limit=limit,
        stream_tokens=stream.streams_tokens(data.get("stream_mode")),
        model_settings=settings,
    )
    if req.input is not None and not isinstance(req.input, dict):
        raise exceptions.ValidationError({"input": "a JSON object (the graph's input)"})
    if command is not None:
        if command.kind == CommandKind.END:
            require(request, "cancel_run", "ending a run with command.goto")
        if command.kind == CommandKind.RESUME:
            require(request, "answer_interrupt", "resuming a run with an answer")
        if command.update is not None:
            require(request, "fork_run", "editing a thread's state with command.update")
    else:
        require(request, "start_run", "starting a run")
    if req.checkpoint_id:
        require(request, "fork_run", "starting a run from a past checkpoint")
    if req.interrupt_before or req.interrupt_after:
        require(request, "debug_run", "setting breakpoints")
    if req.multitask_strategy in ("interrupt", "rollback"):
        require(request, "cancel_run", f"multitask_strategy {req.multitask_strategy!r}")
    return req


def _model_settings(spec: GraphSpec, configurable: dict[str, Any]) -> dict[str, Any]:
    """The model, parameters and prompts a run request (or its assistant) sets in
    ``config.configurable`` (``model``, ``temperature``, ``max_tokens``, ``prompts``, as
    LangGraph's templates take their model there) for a graph that lets a run choose
    them; a bad one is a 422 naming ``config.configurable.<key>``."""
    if not (spec.takes_model or spec.prompts):
        return {}  # a graph of its own: its configurable keys are its own business
    asked = {k: configurable[k] for k in SETTINGS_KEYS if k in configurable}
    try:
        return spec.model_settings(asked).as_dict() if asked else {}
    except SettingsError as exc:
        raise exceptions.ValidationError(
            {f"config.configurable.{k}": v for k, v in exc.errors.items()}) from None


def _thread_for_run(request: Request, thread_id: str | None, data: dict[str, Any]) -> Thread:
    """The thread a run goes on: a new one for a stateless run, or created if asked."""
    if thread_id is None:
        return services.thread_create(user=request.user)
    try:
        return thread_seen(request, thread_id)
    except exceptions.NotFound:
        if data.get("if_not_exists") != "create":
            raise
        try:
            wanted = uuid.UUID(str(thread_id))
        except ValueError:
            raise exceptions.ValidationError({"thread_id": (
                f"{thread_id!r} is not a UUID; a thread created with if_not_exists "
                "needs a UUID as its id")}) from None
        try:
            with transaction.atomic():
                return services.thread_create(user=request.user, thread_id=wanted)
        except IntegrityError:  # another request created it meanwhile: run on that one
            return thread_of(thread_id)


DECISION_ATTEMPTS = 3


def _decide(request: Request, thread: Thread, req: RunRequest) -> Started:
    """Start the LangGraph run the request asks for on ``thread`` (or apply its command,
    whose edit :func:`~dashboard.thread_runs.written` writes once this committed): decided
    again should
    PostgreSQL roll the decision back as a deadlock's victim (past the attempts, the
    handler answers 503 with Retry-After). Every writer of a run and its thread takes the
    thread's row first (store.lock_run, the claim's SQL), so that is a guard, not an
    expected path (before that order, an executor's claim took them the other way round)."""
    def decide() -> Started:
        # concurrent requests on one thread decide one at a time (a request that may create
        # a run holds its user's row too: their queued runs are counted under it)
        with locked(thread, user=request.user if creates_runs(req) else None):
            return start(thread, req, request.user, thread.latest_run())

    return retried(decide, attempts=DECISION_ATTEMPTS)


def create_run(request: Request, thread_id: str | None
               ) -> tuple[LangGraphRun, int, dict[str, Any]]:
    """Start the LangGraph run a request asks for; it, the seq of its ``Run``'s log its
    stream starts after, the body."""
    data = body(request)
    req = run_request(request, data)
    thread = _thread_for_run(request, thread_id, data)
    try:
        # every request, a command's too, decided under the thread's lock, one at a time
        started = _decide(request, thread, req)
    except Exception:
        if thread_id is None:  # a stateless run's thread, made for a run that was refused
            with contextlib.suppress(Exception):  # the refusal is the answer, not this
                services.thread_delete(thread=thread)
        raise
    started = _written(request, thread, started)
    # its events: a resumed or continued Run's from the first after what it had written
    return started.langgraph_run, started.after, data


def applied(request: Request, thread: Thread, req: RunRequest) -> Started:
    """``req`` (a state update's, say) decided under the thread's lock as every run
    request is, then what it writes on LangGraph's own saver written."""
    return _written(request, thread, _decide(request, thread, req))


def _written(request: Request, thread: Thread, started: Started) -> Started:
    """What a command's update or end (or a state update) writes on LangGraph's own saver,
    once decided (:func:`~dashboard.thread_runs.written`)."""
    return retried(lambda: written(thread, started, request.user),
                   attempts=DECISION_ATTEMPTS)


def location_of(langgraph_run: LangGraphRun, then: str = "") -> dict[str, str]:
    """The ``Content-Location`` header of a run's response, and for a stream (``then``
    ``"stream"``) or a wait (``"join"``) its ``Location``: where a client reconnects to
    it, as LangGraph's server sends them."""
    base = f"/threads/{langgraph_run.run.conversation_id}/runs/{langgraph_run.id}"
    return {"Content-Location": base, **({"Location": f"{base}/{then}"} if then else {})}


class RunsView(LangGraphView):
    """``GET /threads/<id>/runs`` lists; ``POST`` starts a background run."""

    request_shapes = {"post": bodies.RunBody}

    def get(self, request: Request, thread_id: str) -> Response:
        thread = thread_of(thread_id)
        runs = LangGraphRun.objects.filter(run__conversation=thread).select_related(
            "run").order_by("-created_at", "-id")
        status = request.query_params.get("status")
        if status:
            if status not in search.RUN_STATUSES:
                raise exceptions.ValidationError({"status": (
                    f"{status!r} is not one of {', '.join(search.RUN_STATUSES)}")})
            runs = runs.with_langgraph_status(status)
        offset, limit = offset_of(request.query_params), limit_of(request.query_params)
        return Response([shapes.run(r) for r in runs[offset: offset + limit]])

    def post(self, request: Request, thread_id: str) -> Response:
        run, _, _ = create_run(request, thread_id)
        return Response(shapes.run(run), headers=location_of(run))


class RunStreamView(LangGraphView):
    """``POST /threads/<id>/runs/stream`` (or ``/runs/stream``): start and stream it."""

    request_shapes = {"post": bodies.RunBody}

    def post(self, request: Request, thread_id: str | None = None) -> StreamingHttpResponse:
        cancels = _on_disconnect(body(request)) == "cancel"
        with stream_slot(request) as slot:
            langgraph_run, after, data = create_run(request, thread_id)
            modes, subgraphs = _modes(data.get("stream_mode")), bool(data.get("stream_subgraphs"))
            # a new run is streamed from its row as written (not read again unless it moved)
            fresh = langgraph_run.run if after == 0 == langgraph_run.run.last_seq else None
            events = stream.aevents(langgraph_run.run_id, modes=modes, subgraphs=subgraphs,
                                    after=after, langgraph_run_id=langgraph_run.id,
                                    written=fresh)
            if cancels:  # the run's own stream: its client going away cancels it
                events = stream.cancel_on_disconnect(events, functools.partial(
                    _acancel_busy, langgraph_run.id, request.user))
        return sse_response(SlottedStream(events, slot), langgraph_run, modes=modes,
                            subgraphs=subgraphs)


ON_DISCONNECT = ("continue", "cancel")


def _on_disconnect(data: dict[str, Any]) -> str:
    """A stream request's ``on_disconnect`` (``continue`` by default, as LangGraph's)."""
    value = data.get("on_disconnect") or "continue"
    if value not in ON_DISCONNECT:
        raise exceptions.ValidationError({"on_disconnect": (
            f"{value!r} is not one of: {', '.join(ON_DISCONNECT)}")})
    return str(value)


def _cancel_busy(langgraph_run_id: uuid.UUID, user: Any) -> None:
    """Cancel the LangGraph run if it still executes or waits to (a stream's client went
    away)."""
    langgraph_run = LangGraphRun.objects.select_related("run").filter(
        id=langgraph_run_id).first()
    if langgraph_run is not None and langgraph_run.is_busy():
        with contextlib.suppress(RunStateError):  # it ended meanwhile
            services.run_cancel(run=langgraph_run.run, user=user, reason=(
                "the client streaming it disconnected (on_disconnect: cancel)"))


async def _acancel_busy(langgraph_run_id: uuid.UUID, user: Any) -> None:
    await sync_to_async(_cancel_busy)(langgraph_run_id, user)


@contextlib.contextmanager
def stream_slot(request: Request) -> Iterator[StreamSlot]:
    """A slot for the stream a request opens (429 past a limit), given back if the
    request fails before its stream starts."""
    slot = stream_slot_take(user=request.user)
    try:
        yield slot
    except BaseException:
        slot.close()
        raise


def _release_connections() -> None:
    """Hand the request's database connections back to the pool (as Django does when the
    request finishes) before its response streams: a stream reads in short statements of
    its own (dashboard/runs/follow.py), and a new run's stream may read nothing at first,
    so the connection would otherwise stay out of the pool for the whole stream (fifty
    streams, fifty connections). One inside a transaction (a test's) is left be."""
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close_if_unusable_or_obsolete()


def sse_response(events: AsyncIterable[bytes], run: LangGraphRun, *, modes: list[str],
                 subgraphs: bool) -> StreamingHttpResponse:
    """A text/event-stream response that is never buffered or cached; its ``Location`` is
    where a client reconnects (with ``Last-Event-ID``) when the stream is cut, a server
    restart say (LangGraph's clients do): the run's join stream, in the same modes."""
    _release_connections()
    response = StreamingHttpResponse(events, content_type="text/event-stream")
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"
    query = urlencode([("stream_mode", mode) for mode in modes]
                      + ([("stream_subgraphs", "true")] if subgraphs else []))
    headers = location_of(run, "stream")
    # in this stream's modes (a join stream without them streams values: other parts than
    # the client asked for)
    headers["Location"] += f"?{query}"
    for key, value in headers.items():
        response[key] = value
    return response


def final_values(run_id: uuid.UUID) -> dict[str, Any]:
    """What ``wait`` and ``join`` return: the thread's values, with its interrupts."""
    run = Run.objects.get(id=run_id)
    current = shapes.run_state(run, str(run.conversation_id))
    values = current["values"] if isinstance(current["values"], dict) else {}
    if current["interrupts"]:
        values = {**values, "__interrupt__": current["interrupts"]}
    if run.status == Run.Status.FAILED:
        values = {**values, "__error__": stream.run_error(run.error_message)}
    return values


afinal_values = sync_to_async(final_values)
""":func:`final_values`, off the event loop."""


async def _json_when_stopped(run_id: uuid.UUID, *, ended: bool = False
                             ) -> AsyncIterator[bytes]:
    """The final values as one JSON body, sent when the run stops (at once for a LangGraph
    run that ``ended``: another went on after it); meanwhile a newline every
    ``PLANWATCH_STREAM_KEEPALIVE_SECONDS`` keeps the connection alive (JSON ignores
    leading whitespace), as LangGraph's server sends it. A drain of this process cuts the
    answer unfinished (:class:`~dashboard.lgserver.stream.StreamCut`): langgraph-sdk's
    ``wait`` and ``join`` then ask again at its ``Location`` (the run's join), where another
    process answers once the run has stopped, rather than take its values so far as the end."""
    every = stream.keepalive_seconds()
    waiting = asyncio.ensure_future(
        asyncio.sleep(0) if ended else stream.astopped(run_id, cut=True))
    try:
        while not waiting.done():
            done, _ = await asyncio.wait({waiting}, timeout=every if every > 0 else None)
            if not done:
                yield b"\n"
        waiting.result()
        yield json.dumps(await afinal_values(run_id), default=str).encode()
    finally:
        waiting.cancel()


class RunWaitView(LangGraphView):
    """``POST /threads/<id>/runs/wait`` (or ``/runs/wait``): start it, answer when it stops."""

    request_shapes = {"post": bodies.RunBody}

    def post(self, request: Request, thread_id: str | None = None) -> StreamingHttpResponse:
        with stream_slot(request) as slot:
            langgraph_run, _, _ = create_run(request, thread_id)
        response = StreamingHttpResponse(
            SlottedStream(_json_when_stopped(langgraph_run.run_id), slot),
            content_type="application/json")
        for key, value in location_of(langgraph_run, "join").items():
            response[key] = value
        return response


class RunView(LangGraphView):
    """``GET`` and ``DELETE /threads/<id>/runs/<run_id>``."""

    def get(self, request: Request, thread_id: str, run_id: str) -> Response:
        """The run, with Aegra's ``output``: what ``join`` answers once it stopped (its
        final values), null while it runs."""
        langgraph_run = run_of(thread_of(thread_id), run_id)
        output = None if langgraph_run.is_busy() else final_values(langgraph_run.run_id)
        return Response({**shapes.run(langgraph_run), "output": output})

    def delete(self, request: Request, thread_id: str, run_id: str) -> Response:
        """The ``Run`` a LangGraph run made is deleted with its resumes and continues (its
        one log and trace); a resume or continue alone is not (409 naming that run)."""
        require(request, "delete_run", "deleting a run")
        langgraph_run = run_of(thread_of(thread_id), run_id)
        if not langgraph_run.is_first:
            raise RunStateError(
                f"run {langgraph_run.id} resumed (or continued) run {langgraph_run.run_id}, "
                "whose event log and checkpoints it shares; delete run "
                f"{langgraph_run.run_id} to delete both")
        services.run_delete(run=langgraph_run.run)
        return Response(status=204)


class RunJoinView(LangGraphView):
    """``GET /threads/<id>/runs/<run_id>/join``: the final values once it stops."""

    def get(self, request: Request, thread_id: str, run_id: str) -> StreamingHttpResponse:
        with stream_slot(request) as slot:
            langgraph_run = run_of(thread_of(thread_id), run_id)
        response = StreamingHttpResponse(
            SlottedStream(_json_when_stopped(langgraph_run.run_id,
                                             ended=not langgraph_run.is_current), slot),
            content_type="application/json")
        for key, value in location_of(langgraph_run, "join").items():  # where to ask again
            response[key] = value
        return response


class RunJoinStreamView(LangGraphView):
    """``GET /threads/<id>/runs/<run_id>/stream``: its events from now, or after
    ``Last-Event-ID`` (a stream resumed after one of its events goes on without a second
    ``metadata``: langgraph-sdk would report it with that event's id, a repeat); an id
    that is not one of its events' (a whole number) is taken as none."""

    def get(self, request: Request, thread_id: str, run_id: str) -> StreamingHttpResponse:
        langgraph_run = run_of(thread_of(thread_id), run_id)
        # a LangGraph run another went on after ended at the last seq before that one's
        upto = None if langgraph_run.is_current else langgraph_run.last_seq()
        # an id this server never sent (its ids are whole numbers) resumes nothing: the
        # stream goes on from now, as LangGraph's server replays only after ids it sent
        last = request.headers.get("Last-Event-ID", "").strip()
        if not re.fullmatch(r"[0-9]{1,18}", last):  # (a seq fits a 64-bit column)
            last = ""
        after = int(last) if last else langgraph_run.last_seq()
        # the SDK sends an empty stream_mode when none is given
        modes = _modes([m for m in request.query_params.getlist("stream_mode") if m]
                       or ["values"])
        subgraphs = request.query_params.get("stream_subgraphs") in ("true", "1")
        events = stream.aevents(langgraph_run.run_id, modes=modes, subgraphs=subgraphs,
                                after=max(after, langgraph_run.first_seq - 1),
                                metadata=not (last and after > 0),
                                langgraph_run_id=langgraph_run.id, upto=upto)
        slot = stream_slot_take(user=request.user)  # last: nothing after it can fail
        return sse_response(SlottedStream(events, slot), langgraph_run, modes=modes,
                            subgraphs=subgraphs)


class NotServedView(LangGraphView):
    """Anything else under ``/langgraph/``: 404 saying what is served."""

    schema = None  # type: ignore[assignment]  # not an operation of the document

    def _answer(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response({"detail": f"{request.path} is not served by Planwatch; it serves "
                         "assistants, threads, runs, the store and crons (see the README's "
                         "'LangGraph server API')"}, status=404)

    get = post = put = patch = delete = _answer
