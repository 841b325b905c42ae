"""``POST /threads/<id>/runs/<run_id>/cancel`` as LangGraph's server answers it.

- A run that is pending or running (Planwatch: queued, running, or answered and about to
  resume) is cancelled: the node in flight stops at once. ``200`` with the run once it
  stopped (``interrupted``; as it stands after :data:`SETTLE_SECONDS` if it has not)
  (LangGraph's server answers ``202`` with no body; its SDK returns whatever body comes,
  and Aegra's clients read this one), or with ``wait=1``
  ``200`` once it stopped, with its final values as ``join`` answers them (``204`` with
  ``action=rollback``: the run is gone).
- Any other run (ended, or waiting for an answer: LangGraph's run has then ended with
  status ``interrupted``) is not cancelled: ``404``, as LangGraph's server answers
  ("Run not found") for a run that is neither pending nor running.
- ``action=rollback`` rolls the LangGraph run back once it stopped, so the thread's state
  is again what it was before it: a ``Run``'s first is deleted with its ``Run`` (its log
  and audit trail with it); a resume or a continue alone goes, and its ``Run`` waits
  again at its question or breakpoint (``services.langgraph_run_roll_back``). The request
  is written with the cancel and done by whoever sees the run stop (its executor, the
  request that waits, the recovery sweep after a crash); ``interrupt`` (the default)
  keeps the run, cancelled.

``POST /runs/cancel`` (the SDK's ``runs.cancel_many``) cancels several: the runs a thread's
``run_ids`` name, or every run of the user's (the team's: everyone's) whose status is
``status`` (``pending``, ``running``, ``all`` of both); each as one cancel above, ``204``;
``404`` when none of them is pending or running, as LangGraph's server answers.

Waiting happens in an async view on the server's loop, never in a request thread: the
sync view tells it what to wait for (:class:`Wait`, through its ``told`` callback).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_not_required
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from dashboard import policy, services
from dashboard.lgserver import bodies, shapes, stream
from dashboard.lgserver.views import (
    LangGraphView,
    ThreadView,
    afinal_values,
    body,
    require,
    run_of,
    thread_of,
)
from dashboard.models import LangGraphRun
from dashboard.runs import states

SETTLE_SECONDS = 2.0
"""How long a cancel's answer waits for its run to stop: its executor stops the node in
flight at once (milliseconds in-process; a worker hears of its aborted job as fast)."""

ACTIONS = ("interrupt", "rollback")
TRUE = ("1", "true", "True")
FALSE = ("", "0", "false", "False")


BULK_STATUSES = {"pending": ("pending",), "running": ("running",),
                 "all": ("pending", "running")}
"""A bulk cancel's ``status`` and the LangGraph run statuses it cancels."""


def _action(request: Request) -> str:
    action = request.query_params.get("action") or "interrupt"
    if action not in ACTIONS:
        raise exceptions.ValidationError({"action": (
            f"{action!r} is not one of {', '.join(ACTIONS)}")})
    return action


def _flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name, "")
    if value not in TRUE + FALSE:
        raise exceptions.ValidationError({name: f"{value!r} is not a boolean; send 1 or 0"})
    return value in TRUE


@dataclass(frozen=True)
class Wait:
    """What the answer to a cancel that asked to ``wait`` waits for: the ``Run`` to stop
    (and its rollback, if asked, to be done)."""

    run_id: uuid.UUID
    roll_back: bool
    settle: bool = False
    """Not asked to wait: the answer is the run once it stopped (at most
    :data:`SETTLE_SECONDS`), as Aegra answers it (``interrupted``)."""


class RunCancelView(LangGraphView):
    """Parse, check and cancel (and roll back, if asked); the answer is the run as the
    cancel left it, or, with ``wait``, what :func:`run_cancel` waits for (``told``)."""

    told: Callable[[Wait], None] | None = None
    """Who hears what an answer that waits is to wait for (:func:`run_cancel`)."""

    def post(self, request: Request, thread_id: str, run_id: str) -> Response:
        require(request, "cancel_run", "cancelling a run")
        wait = _flag(request, "wait")
        action = _action(request)
        langgraph_run = run_of(thread_of(thread_id), run_id)
        if not langgraph_run.is_busy():  # (one another went on after is interrupted)
            raise exceptions.NotFound(
                f"run {langgraph_run.id} is {langgraph_run.langgraph_status}, neither pending "
                "nor running: there is nothing to cancel (as on LangGraph's server)")
        gone = ""
        if action == "rollback":  # done once it stopped, by whoever sees it stop
            gone = services.langgraph_run_roll_back(langgraph_run=langgraph_run,
                                                    user=request.user)
            if not gone:
                langgraph_run.run.refresh_from_db()
        else:
            langgraph_run.run = services.run_cancel(run=langgraph_run.run, user=request.user)
        answer = shapes.run(langgraph_run)
        if gone:  # rolled back at once (nothing executed it): gone, as the cancel left it
            answer["status"] = states.meaning(states.State.CANCELLED).langgraph
        if self.told is not None and wait:
            self.told(Wait(langgraph_run.run_id, roll_back=action == "rollback"))
        elif self.told is not None and action != "rollback" and langgraph_run.run.is_busy():
            # (a rollback's run is gone once it stopped: its answer is the cancel's)
            self.told(Wait(langgraph_run.run_id, roll_back=False, settle=True))
        return Response(answer)


def _named(request: Request, data: dict[str, Any]) -> QuerySet[LangGraphRun]:
    """The LangGraph runs a bulk cancel names, of runs the user may act on: by ``status``,
    or the thread's ``run_ids``; 422 naming what is missing or bad."""
    status = str(data.get("status") or "").lower()
    visible = policy.runs_visible(request.user)
    if status:
        if status not in BULK_STATUSES:
            raise exceptions.ValidationError({"status": (
                f"{status!r} is not one of {', '.join(BULK_STATUSES)}")})
        if data.get("thread_id") or data.get("run_ids"):
            raise exceptions.ValidationError({"status": (
                "a status cancels every run so, whatever its thread: send it without "
                "thread_id and run_ids")})
        found = LangGraphRun.objects.none()
        for name in BULK_STATUSES[status]:
            found |= LangGraphRun.objects.with_langgraph_status(name)
        return found.filter(run__in=visible)
    ids = data.get("run_ids")
    if not data.get("thread_id") or not isinstance(ids, list) or not ids:
        raise exceptions.ValidationError({"run_ids": (
            "give thread_id and run_ids (a list of its runs' UUIDs), or a status: "
            f"{', '.join(BULK_STATUSES)}")})
    try:
        thread = uuid.UUID(str(data["thread_id"]))
        wanted = [uuid.UUID(str(i)) for i in ids]
    except ValueError:
        raise exceptions.ValidationError({"run_ids": (
            "thread_id and each of run_ids must be a UUID")}) from None
    return LangGraphRun.objects.filter(run__conversation_id=thread, id__in=wanted,
                                       run__in=visible)


class RunsCancelView(LangGraphView):
    """``POST /runs/cancel``: each run named that is pending or running is cancelled."""

    request_shapes = {"post": bodies.RunsCancelBody}

    def post(self, request: Request) -> Response:
        require(request, "cancel_run", "cancelling runs")
        action = _action(request)
        named = _named(request, body(request)).select_related("run")
        busy = [langgraph_run for langgraph_run in named if langgraph_run.is_busy()]
        if not busy:
            raise exceptions.NotFound(
                "no run to cancel: none of the runs named is pending or running (as on "
                "LangGraph's server); list a thread's runs with GET /threads/<id>/runs")
        for langgraph_run in busy:
            with contextlib.suppress(services.RunStateError):  # it stopped meanwhile
                if action == "rollback":  # done once it stopped, by whoever sees it stop
                    services.langgraph_run_roll_back(langgraph_run=langgraph_run,
                                                     user=request.user)
                else:
                    services.run_cancel(run=langgraph_run.run, user=request.user)
        return Response(status=204)


def _cancel(request: HttpRequest, **kwargs: Any) -> tuple[HttpResponse, Wait | None]:
    """The cancel view's answer, and what an answer that waits is to wait for (None: it
    answers now: no wait asked, or the request refused)."""
    told: list[Wait] = []
    response = RunCancelView.as_view(told=told.append)(request, **kwargs)
    return response, (told[0] if told and response.status_code == 200 else None)


@login_not_required  # the API view inside authenticates (401 without a key), as every view here
@csrf_exempt
async def run_cancel(request: HttpRequest, **kwargs: Any) -> HttpResponse:
    """The cancel, then (``wait=1``) the wait until the run stopped: its final values, or
    ``204`` once it is rolled back (by its executor, or here if this sees it stop first)."""
    response, wait = await sync_to_async(_cancel)(request, **kwargs)
    if wait is None:
        return response
    if wait.settle:  # its executor stops it at once: the run as it then stands
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stream.astopped(wait.run_id), SETTLE_SECONDS)
        try:
            shape = await sync_to_async(_run_shape)(**kwargs)
        except (Http404, exceptions.NotFound):  # deleted meanwhile: as the cancel left it
            return response
        return JsonResponse(shape, json_dumps_params={"default": str})
    await stream.astopped(wait.run_id)
    if wait.roll_back:
        await sync_to_async(services.run_roll_back_stopped)(run_id=wait.run_id)
        return HttpResponse(status=204)
    # as LangGraph's server: the run's final values (as join answers them) once it stopped
    answer = JsonResponse(await afinal_values(wait.run_id), json_dumps_params={"default": str})
    base = f"/threads/{kwargs['thread_id']}/runs/{kwargs['run_id']}"
    answer["Location"], answer["Content-Location"] = f"{base}/join", base
    return answer


def _run_shape(*, thread_id: str, run_id: str) -> dict[str, Any]:
    """The LangGraph run as ``runs.get`` answers it."""
    return shapes.run(run_of(thread_of(thread_id), run_id))


_thread = ThreadView.as_view()


@login_not_required  # the API view inside authenticates (401 without a key), as every view here
@csrf_exempt
async def thread(request: HttpRequest, **kwargs: Any) -> HttpResponse:
    """``GET``, ``PATCH``, ``DELETE /threads/<id>``. Deleting a thread whose runs are in
    flight cancels them (:meth:`ThreadView.delete`), waits here until they stopped, then
    deletes it: ``204``, as LangGraph's server deletes such a thread."""
    response = await sync_to_async(_thread)(request, **kwargs)
    pending = getattr(response, "planwatch_delete", None)
    if pending is None:
        return response  # type: ignore[no-any-return]
    doomed, run_ids = pending
    for run_id in run_ids:
        await stream.astopped(run_id)
    try:
        await sync_to_async(services.thread_delete)(thread=doomed)
    except services.RunStateError as exc:  # a new run started meanwhile
        return JsonResponse({"detail": str(exc), "code": exc.code}, status=409)
    return HttpResponse(status=204)


# the OpenAPI document describes it as the view it wraps (drf-spectacular reads ``cls``)
thread.cls = ThreadView  # type: ignore[attr-defined]
thread.initkwargs = {}  # type: ignore[attr-defined]
