"""Django's ASGI handler with a request's middleware and view in one thread hop.

Django's own ASGI handler runs its middleware in async mode: each ``MiddlewareMixin``
middleware (sessions, CSRF, auth, messages, …) then hops to the request's thread for its
``process_request`` and again for its ``process_response``, and back to the event loop
after each; a sync-only middleware (WhiteNoise's) turns the chain sync above it, another
hop pair. A request of the LangGraph API took some twelve thread hops before and after
its view (a fifth of a run start's CPU, measured in stop 54). Here the whole chain, as
Django builds it for WSGI, runs on the request's thread in one hop, as a WSGI server runs
it; an async view (``lgserver.cancel``) is run from there on the event loop, as Django runs
one under WSGI. What a response streams (SSE, a wait's JSON) is still sent from the event
loop, and everything else (request signals, the body's reading) as Django's handler does.
"""

from __future__ import annotations

from typing import Any

import django
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponseBase


class OneHopASGIHandler(ASGIHandler):
    """:class:`~django.core.handlers.asgi.ASGIHandler`, its middleware chain sync and run
    on the request's thread in one hop."""

    def __init__(self) -> None:
        super().__init__()
        self._get_response_on_thread = sync_to_async(self.get_response, thread_sensitive=True)

    def load_middleware(self, is_async: bool = False) -> None:
        """The chain as Django builds it for WSGI (each middleware sync)."""
        super().load_middleware(is_async=False)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        """The response, from the chain run on the request's thread (the thread that
        Django's request signals and the response's close run on too)."""
        response: HttpResponseBase = await self._get_response_on_thread(request)
        return response


def get_asgi_application() -> Any:
    """Django's ``get_asgi_application``, with :class:`OneHopASGIHandler`."""
    django.setup(set_prefix=False)
    return OneHopASGIHandler()
