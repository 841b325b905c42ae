"""A tiny OpenAI-compatible chat completions server on loopback, for real LangChain clients.

It answers every ``POST /v1/chat/completions`` with fixed content and a ``usage`` block,
as JSON or, when asked to stream, as server-sent events (usage in the last chunk when the
client asks for it with ``stream_options.include_usage``). A request for structured output
(``response_format`` with a JSON schema, or tools) gets :data:`DECISION`; anything else
gets :data:`REPLY`. Every request body is kept in :attr:`OpenAIServer.requests`.

``PLANWATCH_LLM=tests.openai_server:chat_model`` builds a ``ChatOpenAI`` pointed at the
server named by ``PLANWATCH_TEST_OPENAI_URL``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "planwatch-test-model"
USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150,
         "prompt_tokens_details": {"cached_tokens": 20}}
DECISION = {"action": "ask_user", "field": "market.price", "query": None,
            "reason": "Only the operator knows the price"}
REPLY = "Hello from the test model."


class OpenAIServer:
    """The server, started on a free loopback port in a thread of its own."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.delay = 0.0
        """Seconds each answer waits before it is sent (a model that takes its time)."""
        self.chunk_delay = 0.0
        """Seconds between two chunks of a streamed answer (a model that writes as it goes)."""
        self.reply = REPLY
        """The text of a plain answer (streamed 8 characters a chunk)."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if server.delay:
                    time.sleep(server.delay)
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404, f"no {self.path}; only /v1/chat/completions")
                    return
                if body.get("stream"):
                    self._stream(body)
                else:
                    self._json(completion(body, reply=server.reply))

            def _json(self, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                text = answer(body, reply=server.reply)["content"] or ""
                pieces = [text[i:i + 8] for i in range(0, len(text), 8)]
                for i, piece in enumerate(pieces):
                    if i and server.chunk_delay:
                        time.sleep(server.chunk_delay)
                    delta = {"content": piece, **({"role": "assistant"} if i == 0 else {})}
                    self._chunk(chunk([{"index": 0, "delta": delta, "finish_reason": None}]))
                self._chunk(chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
                if (body.get("stream_options") or {}).get("include_usage"):
                    self._chunk({**chunk([]), "usage": USAGE})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _chunk(self, payload: dict[str, Any]) -> None:
                self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> OpenAIServer:
        """Serve in the background."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port."""
        self.httpd.shutdown()
        self.httpd.server_close()


def answer(body: dict[str, Any], reply: str = REPLY) -> dict[str, Any]:
    """The assistant message for a request: the decision if structure is asked for, else
    ``reply``."""
    if body.get("tools"):
        name = body["tools"][0]["function"]["name"]
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": name, "arguments": json.dumps(DECISION)}}]}
    if body.get("response_format"):
        return {"role": "assistant", "content": json.dumps(DECISION)}
    return {"role": "assistant", "content": reply}


def completion(body: dict[str, Any], reply: str = REPLY) -> dict[str, Any]:
    """A whole (not streamed) chat completion with usage."""
    message = answer(body, reply)
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": MODEL,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls")
                         else "stop"}],
            "usage": USAGE}


def chunk(choices: list[dict[str, Any]]) -> dict[str, Any]:
    """One streamed chunk."""
    return {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0,
            "model": MODEL, "choices": choices}


def chat_model(streaming: bool = False) -> Any:
    """``ChatOpenAI`` on the server named by ``PLANWATCH_TEST_OPENAI_URL``."""
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    return ChatOpenAI(model=MODEL, base_url=os.environ["PLANWATCH_TEST_OPENAI_URL"],
                      api_key=SecretStr("test-key"), streaming=streaming, stream_usage=True,
                      max_retries=0)


def listened_model() -> Any:
    """``ChatOpenAI`` on the same server as a provider's setting makes it
    (``init_chat_model``): streaming left unset, so it streams when a streaming handler
    listens (a LangGraph client of the messages modes), and answers whole otherwise."""
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    return ChatOpenAI(model=MODEL, base_url=os.environ["PLANWATCH_TEST_OPENAI_URL"],
                      api_key=SecretStr("test-key"), stream_usage=True, max_retries=0)
