"""A loopback OpenAI-compatible chat model for Aegra's example graphs (``run.sh``).

It answers like a small model would, slowly enough for the suite's cancel tests to find
a run still going (``STUB_DELAY`` seconds a call, four times that when the user asks for
something long): on the first turn of a conversation with tools bound, a request to
search or look up the weather gets a call of the first tool; a system prompt asking for
French gets French; anything else ``"Hello! yes"``. The answer names the model asked for.
``python stub_model.py PORT``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DELAY = float(os.environ.get("STUB_DELAY", "1.0"))
LONG = re.compile(r"long|essay|slowly|story|joke|100", re.IGNORECASE)
TOOLS = re.compile(r"weather|search|look up|forecast", re.IGNORECASE)
USAGE = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """The assistant message for a chat completions request."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    text = last.get("content") if isinstance(last.get("content"), str) else ""
    first_turn = not any(m.get("role") == "assistant" for m in messages)
    if body.get("tools") and first_turn and last.get("role") == "user" and TOOLS.search(text):
        name = body["tools"][0]["function"]["name"]
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": name, "arguments": json.dumps({"query": text})}}]}
    system = " ".join(str(m.get("content")) for m in messages
                      if m.get("role") in ("system", "developer"))
    if re.search(r"french", system, re.IGNORECASE):
        return {"role": "assistant", "content": "Bonjour! oui"}
    return {"role": "assistant", "content": "Hello! yes"}


def delay_of(body: dict[str, Any]) -> float:
    """How long the answer takes: longer when the user's last message asks for much."""
    said = [m.get("content") for m in body.get("messages") or [] if m.get("role") == "user"]
    return DELAY * (4 if said and LONG.search(json.dumps(said[-1])) else 1)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        message, delay = answer(body), delay_of(body)
        model = body.get("model", "stub")
        time.sleep(delay / 2)
        if body.get("stream"):
            self._stream(body, message, model, delay)
            return
        time.sleep(delay / 2)
        data = json.dumps({
            "id": "c", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls")
                         else "stop"}],
            "usage": USAGE}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, body: dict[str, Any], message: dict[str, Any], model: str,
                delay: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> None:
            payload = {"id": "c", "object": "chat.completion.chunk", "created": 0,
                       "model": model, "choices": choices, **extra}
            self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
            self.wfile.flush()

        if message.get("tool_calls"):
            call = {"index": 0, **message["tool_calls"][0]}
            chunk([{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]},
                    "finish_reason": None}])
            chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])
        else:
            words = message["content"].split(" ")
            for i, word in enumerate(words):
                time.sleep(delay / 2 / len(words))
                delta = {"content": word if i == 0 else f" {word}",
                         **({"role": "assistant"} if i == 0 else {})}
                chunk([{"index": 0, "delta": delta, "finish_reason": None}])
            chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}])
        if (body.get("stream_options") or {}).get("include_usage"):
            chunk([], usage=USAGE)
        self.wfile.write(b"data: [DONE]\n\n")


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
