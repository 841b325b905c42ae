"""Background duties of a web process: the cron scheduler, the deadline and notice poll,
and (runs in process) the reaper of dead executors' runs, started once per process from
the ASGI application itself, however it is served.

``manage.py serve`` starts them before daphne serves; ``daphne config.asgi:application``,
uvicorn or any other ASGI server start them through :func:`with_duties`: on the lifespan's
startup where the server sends one (uvicorn), else on the first connection (daphne sends
no lifespan events). Each duty claims what it acts on with a conditional write (a due cron,
a question's moment, a stale run), so every web process may run them: each is done once.
Each loop notes when it last went round (:mod:`dashboard.duty_beats`), which is what
``/readyz`` and the Crons page say of them in this process.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings

from dashboard import crons, deadlines
from dashboard.duty_beats import STARTED
from dashboard.runs import dispatch

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_lock = threading.Lock()


def duties_start() -> bool:
    """Start this process's duties unless they run already; whether this call started them."""
    with _lock:
        if STARTED:
            return False
        STARTED.add("duties")
    if dispatch.in_process():
        dispatch.start_reaper()
    crons.start_scheduler()  # a due cron is claimed once, whatever the processes
    deadlines.start_poller()  # notices and deadlines, each claimed once, the same way
    return True


def with_duties(application: Callable[[Scope, Receive, Send], Awaitable[None]]
                ) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """``application`` that starts this process's duties (in a web process) on the
    lifespan's startup or its first connection, and answers the lifespan itself."""
    web = settings.PROCESS_ROLE == "web"

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if web and not STARTED:
            duties_start()
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await application(scope, receive, send)

    return app
