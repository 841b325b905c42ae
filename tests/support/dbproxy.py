"""A TCP proxy between a served Planwatch and its PostgreSQL that a test cuts and mends:
the database goes away for that server alone (the shared PostgreSQL server, and the
test's own connections, never notice)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from urllib.parse import urlsplit, urlunsplit


class CuttableProxy:
    """Forwards each connection to ``target``; cut, it closes every connection it carries
    and closes each new one as soon as it is accepted (the client reads "server closed the
    connection"), until it is mended."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.is_cut = threading.Event()
        self.closed = threading.Event()
        self.lock = threading.Lock()
        self.open: set[socket.socket] = set()
        threading.Thread(target=self._accept, name="db-proxy", daemon=True).start()

    def url(self, database_url: str) -> str:
        """``database_url`` with its host and port this proxy's."""
        parts = urlsplit(database_url)
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{self.port}"))

    def cut(self) -> None:
        """The database is gone: every connection through here closed, new ones refused."""
        self.is_cut.set()
        with self.lock:
            carried, self.open = self.open, set()
        for sock in carried:
            _close(sock)

    def mend(self) -> None:
        """The database is back: new connections go through again."""
        self.is_cut.clear()

    def close(self) -> None:
        """Stop listening and close every connection."""
        self.closed.set()
        self.cut()
        _close(self.listener)

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.is_cut.is_set():
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self.lock:
                self.open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with self.lock:
                self.open.discard(source)
                self.open.discard(sink)
            _close(source)
            _close(sink)


def _close(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@contextmanager
def cuttable(database_url: str) -> Iterator[tuple[CuttableProxy, str]]:
    """A :class:`CuttableProxy` to the PostgreSQL of ``database_url``, and the URL through it."""
    parts = urlsplit(database_url)
    proxy = CuttableProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    try:
        yield proxy, proxy.url(database_url)
    finally:
        proxy.close()
