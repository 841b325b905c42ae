"""Notices' far ends on loopback, as fixtures (a pytest plugin: tests/conftest.py's
``pytest_plugins``): a real SMTP server (aiosmtpd) Django's SMTP backend sends to, and a
webhook receiver that checks each call's signature and fails its first ``fail`` calls."""

from __future__ import annotations

import email
import hashlib
import hmac
import json
import threading
from email import policy as email_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller

from tests.conftest import free_port

SECRET = "s3cret-for-tests"


class Inbox:
    """aiosmtpd's handler: keeps every message the server accepts."""

    def __init__(self) -> None:
        self.messages: list[email.message.EmailMessage] = []
        self.envelopes: list[list[str]] = []

    async def handle_DATA(self, server, session, envelope):
        self.envelopes.append(list(envelope.rcpt_tos))
        self.messages.append(email.message_from_bytes(envelope.content,
                                                      policy=email_policy.default))
        return "250 Message accepted for delivery"


@pytest.fixture
def smtp(settings):
    """A real SMTP server on loopback, and Django's SMTP backend pointed at it."""
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.PLANWATCH = {**settings.PLANWATCH, "NOTIFY_EMAIL": True, "WEBHOOK_URL": "",
                          "BASE_URL": "http://planwatch.test"}
    yield inbox
    controller.stop()


class Receiver(BaseHTTPRequestHandler):
    """A webhook receiver that fails its first ``fail`` calls with 500."""

    calls: list[dict] = []
    fail = 2

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        stamp = self.headers.get("X-Planwatch-Timestamp", "")
        expected = "sha256=" + hmac.new(SECRET.encode(), stamp.encode() + b"." + body,
                                        hashlib.sha256).hexdigest()
        valid = hmac.compare_digest(expected, self.headers.get("X-Planwatch-Signature", ""))
        type(self).calls.append({"valid": valid, "body": json.loads(body)})
        status = 500 if len(type(self).calls) <= type(self).fail else (200 if valid else 401)
        self.send_response(status)
        self.end_headers()
        self.wfile.write(b"nope" if status >= 300 else b"ok")

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver(settings):
    Receiver.calls, Receiver.fail = [], 2
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.PLANWATCH = {**settings.PLANWATCH, "NOTIFY_EMAIL": False,
                          "WEBHOOK_URL": f"http://127.0.0.1:{server.server_port}/hook",
                          "WEBHOOK_SECRET": SECRET, "NOTICE_RETRY_SECONDS": 1.0,
                          "NOTICE_ATTEMPTS": 4, "BASE_URL": "http://planwatch.test"}
    yield Receiver
    server.shutdown()
    server.server_close()
