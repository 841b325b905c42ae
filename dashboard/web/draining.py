"""A web process that stops gracefully: what its listener, streams and sockets do on SIGTERM.

:class:`DrainingServer` (the server ``manage.py serve`` runs) answers the first SIGTERM
(or SIGINT) by draining, within :data:`DRAIN_SECONDS`:

1. it stops listening (the kernel hands new connections to the other processes on the
   socket; a lone process refuses them, and clients retry);
2. every SSE stream is cut (``follow.stop_following``; ``stream.StreamCut``: its
   response is left unfinished, and breaks when the process closes its connections), so
   LangGraph's clients reconnect to the stream's ``Location`` with ``Last-Event-ID`` and
   miss nothing, even of a run that ends meanwhile; every websocket is closed with code
   1012 (service restart), so the pages reconnect and send the last seq they have;
3. it waits for the requests in flight to answer, then stops.

A second SIGTERM stops it at once. The process's executor is drained after that
(``dispatch.drain_executor``): its runs are handed over, not lost.
"""

from __future__ import annotations

import logging
import signal
import time
from typing import Any

from daphne.ws_protocol import WebSocketProtocol
from twisted.internet import reactor as _reactor

from dashboard.runs.follow import stop_following
from dashboard.web.accesslog import RedactingServer

logger = logging.getLogger("planwatch.serve")

reactor: Any = _reactor  # (twisted's interface declarations do not type its methods)

DRAIN_SECONDS = 10.0
"""Seconds a stopping web process waits for its requests in flight before it stops."""

SERVICE_RESTART = 1012
"""The websocket close code that tells a client to reconnect (htmx's ws extension does)."""

class DrainingServer(RedactingServer):
    """daphne's server (access log redacted) that drains on SIGTERM (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ports: list[Any] = []
        self.stop_started: float | None = None

    def listen_success(self, port: Any) -> None:
        """Keep the listening port, to stop listening when draining."""
        self.ports.append(port)
        super().listen_success(port)

    def run(self) -> None:
        """Run daphne, with SIGTERM and SIGINT draining first."""
        reactor.callWhenRunning(self._install_handlers)
        super().run()

    def _install_handlers(self) -> None:
        loop = reactor._asyncioEventloop
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.drain)

    def drain(self) -> None:
        """Stop listening, end streams and close sockets, then stop once requests answered
        (at once on a second call)."""
        if self.stop_started is not None:
            self.stop()
            return
        self.stop_started = time.monotonic()
        stop_following()
        for port in self.ports:
            port.stopListening()
        sockets = 0
        for protocol in list(self.connections):
            if isinstance(protocol, WebSocketProtocol) and protocol.state == protocol.STATE_OPEN:
                # (autobahn's sendClose refuses codes below 3000 but 1000)
                protocol.sendCloseFrame(code=SERVICE_RESTART, isReply=False)
                sockets += 1
        logger.info("draining: stopped listening, closed %d sockets, %d connections open",
                    sockets, len(self.connections))
        reactor.callLater(0.1, self._stop_when_quiet)

    def _stop_when_quiet(self) -> None:
        assert self.stop_started is not None
        busy = [p for p, details in self.connections.items()
                if not details.get("disconnected") and not isinstance(p, WebSocketProtocol)
                and details.get("application_instance") is not None
                and not details["application_instance"].done()]
        if busy and time.monotonic() - self.stop_started < DRAIN_SECONDS:
            reactor.callLater(0.1, self._stop_when_quiet)
            return
        logger.info("draining done after %.1f s (%d requests cut)",
                    time.monotonic() - self.stop_started, len(busy))
        self.stop()
