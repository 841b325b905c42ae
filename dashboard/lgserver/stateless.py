"""Stateless runs: ``POST /runs``, ``/runs/stream`` and ``/runs/wait`` without a thread.

As on LangGraph's server, such a run gets a temporary thread of its own, deleted (with the
run and its log) once the run stops, unless the request says ``on_completion: "keep"``.
A streamed or awaited run's thread goes when its answer was sent; a background run's (or
one whose client left early) when the run stops, watched on the executor's loop.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from dashboard import services
from dashboard.lgserver import bodies, shapes, stream
from dashboard.lgserver.views import (
    LangGraphView,
    RunStreamView,
    RunWaitView,
    body,
    create_run,
    location_of,
)
from dashboard.models import Thread
from dashboard.runs.dispatch import get_executor

logger = logging.getLogger("planwatch.lgserver")

ON_COMPLETION = ("delete", "keep")


def deletes_thread(request: Request) -> bool:
    """Whether the request's temporary thread goes when its run stops (``on_completion``,
    ``delete`` by default); 422 naming the field for anything else."""
    value = body(request).get("on_completion") or "delete"
    if value not in ON_COMPLETION:
        raise exceptions.ValidationError({"on_completion": (
            f"{value!r} is not one of {', '.join(ON_COMPLETION)}; 'keep' keeps the run's "
            "thread after it stops")})
    return bool(value == "delete")


def temporary_thread_delete(*, thread_id: uuid.UUID) -> bool:
    """Delete a stateless run's thread, with its runs, unless one of them is busy again
    (a client started another on it meanwhile); whether it was deleted."""
    thread = Thread.objects.filter(id=thread_id).first()
    if thread is None:
        return False
    if shapes.busy(thread.latest_run()) or thread.has_queue():
        logger.info("temporary thread %s is busy again; kept", thread_id)
        return False
    try:  # its runs, their events and their LangGraph checkpoints
        services.thread_delete(thread=thread)
    except services.RunStateError:
        logger.info("temporary thread %s is busy again; kept", thread_id)
        return False
    return True


async def adelete_when_stopped(run_id: uuid.UUID, thread_id: uuid.UUID) -> None:
    """Wait until the run stops, then delete its temporary thread."""
    await stream.astopped(run_id)
    await sync_to_async(temporary_thread_delete)(thread_id=thread_id)


def delete_when_stopped(run_id: uuid.UUID, thread_id: uuid.UUID) -> None:
    """Have this process's executor loop delete the thread once the run stops."""
    get_executor().spawn(adelete_when_stopped(run_id, thread_id))


class TemporaryThreadStream:
    """A response's content that deletes the run's thread once it was all sent (the run
    stopped), or, if the client left first, once the run stops."""

    def __init__(self, content: Any, run_id: uuid.UUID, thread_id: uuid.UUID) -> None:
        self.content = content
        self.run_id = run_id
        self.thread_id = thread_id
        self.handled = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """The content, then the thread deleted."""
        async for part in self.content:
            yield part
        self.handled = True
        await sync_to_async(temporary_thread_delete)(thread_id=self.thread_id)

    def close(self) -> None:
        """Close the content; if it was not all sent, delete the thread when the run stops."""
        close = getattr(self.content, "close", None)
        if close is not None:
            close()
        if not self.handled:
            self.handled = True
            delete_when_stopped(self.run_id, self.thread_id)


def _temporary(response: StreamingHttpResponse, temporary: bool) -> StreamingHttpResponse:
    """``response`` whose content deletes its run's thread when sent, if ``temporary``."""
    if not temporary:
        return response
    location = response["Content-Location"]  # /threads/<thread>/runs/<run>
    _, _, thread_id, _, run_id = location.split("/")
    response.streaming_content = TemporaryThreadStream(  # type: ignore[assignment]
        response.streaming_content, uuid.UUID(run_id), uuid.UUID(thread_id))
    return response


class StatelessRunsView(LangGraphView):
    """``POST /runs``: a background run on a temporary thread."""

    request_shapes = {"post": bodies.RunBody}

    def post(self, request: Request) -> Response:
        temporary = deletes_thread(request)
        langgraph_run, _, _ = create_run(request, None)
        run = langgraph_run.run  # a new thread's first: the same id
        if temporary:
            assert run.conversation_id is not None
            delete_when_stopped(run.id, run.conversation_id)
        return Response(shapes.run(langgraph_run), headers=location_of(langgraph_run))


class StatelessRunStreamView(RunStreamView):
    """``POST /runs/stream``: start a run on a temporary thread and stream it."""

    def post(self, request: Request, thread_id: str | None = None) -> StreamingHttpResponse:
        temporary = deletes_thread(request)
        return _temporary(super().post(request, None), temporary)


class StatelessRunWaitView(RunWaitView):
    """``POST /runs/wait``: start a run on a temporary thread, answer when it stops."""

    def post(self, request: Request, thread_id: str | None = None) -> StreamingHttpResponse:
        temporary = deletes_thread(request)
        return _temporary(super().post(request, None), temporary)
