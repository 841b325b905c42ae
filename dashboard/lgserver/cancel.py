"""``POST /threads/<id>/runs/<run_id>/cancel`` as LangGraph's server answers it.

- A run that is pending or running (Planwatch: queued, running, or answered and about to
  resume) is cancelled: ``202``, or with ``wait=1`` ``200`` once it stopped, with its final
  values as ``join`` answers them (``204`` with ``action=rollback``: the run is gone).
- Any other run (ended, or waiting for an answer: LangGraph's run has then ended with
  status ``interrupted``) is not cancelled: ``404``, as LangGraph's server answers
  ("Run not found") for a run that is neither pending nor running.
- ``action=rollback`` deletes the run (its log and its audit trail with it) once it
  stopped, so the thread's state is again what it was before the run; ``interrupt``
  (the default) keeps it, cancelled.

Waiting happens in an async view on the server's loop, never in a request thread.
"""

from __future__ import annotations

import uuid
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from dashboard import services
from dashboard.lgserver import shapes, stream
from dashboard.lgserver.views import (
    LangGraphView,
    ThreadView,
    final_values,
    require,
    run_of,
    thread_of,
)
from dashboard.models import Run
from dashboard.runs.dispatch import get_executor

ACTIONS = ("interrupt", "rollback")
TRUE = ("1", "true", "True")
FALSE = ("", "0", "false", "False")


def _flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name, "")
    if value not in TRUE + FALSE:
        raise exceptions.ValidationError({name: f"{value!r} is not a boolean; send 1 or 0"})
    return value in TRUE


def rolled_back(*, run_id: uuid.UUID) -> bool:
    """Delete a cancelled run rolled back, once it stopped; whether it was deleted."""
    run = Run.objects.filter(id=run_id).first()
    if run is None or shapes.busy(run):
        return False
    try:  # the run, its events and its LangGraph checkpoints
        services.run_delete(run=run)
    except services.RunStateError:  # busy again meanwhile
        return False
    return True


async def arolled_back_when_stopped(run_id: uuid.UUID) -> None:
    """Wait until the run stops, then delete it."""
    await stream.astopped(run_id)
    await sync_to_async(rolled_back)(run_id=run_id)


class RunCancelView(LangGraphView):
    """Parse, check and cancel; the answer carries what :func:`run_cancel` waits for."""

    def post(self, request: Request, thread_id: str, run_id: str) -> Response:
        require(request, "cancel_run", "cancelling a run")
        wait = _flag(request, "wait")
        action = request.query_params.get("action") or "interrupt"
        if action not in ACTIONS:
            raise exceptions.ValidationError({"action": (
                f"{action!r} is not one of {', '.join(ACTIONS)}")})
        langgraph_run = run_of(thread_of(thread_id), run_id)
        if not langgraph_run.is_busy():  # (one another went on after is interrupted)
            raise exceptions.NotFound(
                f"run {langgraph_run.id} is {langgraph_run.langgraph_status}, neither pending "
                "nor running: there is nothing to cancel (as on LangGraph's server)")
        run = langgraph_run.run
        services.run_cancel(run=run, user=request.user)
        response = Response(status=202)
        response.planwatch_wait = (run.id, wait, action == "rollback")  # type: ignore[attr-defined]
        if action == "rollback" and not wait:
            get_executor().spawn(arolled_back_when_stopped(run.id))
        return response


_cancel = RunCancelView.as_view()


@login_not_required  # the API view inside authenticates (401 without a key), as every view here
@csrf_exempt
async def run_cancel(request: HttpRequest, **kwargs: Any) -> HttpResponse:
    """The cancel, then (``wait=1``) the wait until the run stopped: its final values."""
    response = await sync_to_async(_cancel)(request, **kwargs)
    run_id, wait, rollback = getattr(response, "planwatch_wait", (None, False, False))
    if run_id is None or not wait:
        return response  # type: ignore[no-any-return]
    await stream.astopped(run_id)
    if rollback:
        await sync_to_async(rolled_back)(run_id=run_id)
        return HttpResponse(status=204)
    # as LangGraph's server: the run's final values (as join answers them) once it stopped
    answer = JsonResponse(await final_values(run_id), json_dumps_params={"default": str})
    base = f"/threads/{kwargs['thread_id']}/runs/{kwargs['run_id']}"
    answer["Location"], answer["Content-Location"] = f"{base}/join", base
    return answer


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
