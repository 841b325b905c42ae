#!/usr/bin/env python3
"""Start a field-acquisition run over Planwatch's REST API, answer its questions, print the result.

Needs only ``requests`` and an API token (``manage.py create_token <username>``; the
user needs the start_run and answer_interrupt permissions)::

    python api_client.py --url http://127.0.0.1:8000 --token <key> \\
        --answer core.region=France --answer market.price=30

Progress (events and questions) goes to stderr; the finished run's output, as JSON, to
stdout. Copy it and change ``ANSWERS`` or ``choose_answer`` to suit your own graphs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import requests

FINISHED = {"succeeded", "failed", "cancelled"}
# Answers by the question's field; anything else is answered from the question itself.
ANSWERS: dict[str, Any] = {"core.region": "Germany", "core.currency": "EUR",
                           "market.price": 47.88}


class ApiError(RuntimeError):
    """The API refused a request; the message carries its ``detail``."""


class Planwatch:
    """A tiny client: one ``requests.Session`` carrying the token."""

    def __init__(self, url: str, token: str, timeout: float = 10) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers.update({"Authorization": f"Token {token}",
                                     "Accept": "application/json"})

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request; a 4xx/5xx raises ``ApiError`` with the server's ``detail``."""
        response = self.session.request(method, f"{self.url}{path}", timeout=self.timeout,
                                        **kwargs)
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text[:200]
            raise ApiError(f"{method} {path}: {response.status_code} {detail}")
        return response.json()

    def events(self, run_id: str, after: int) -> list[dict[str, Any]]:
        """Every event of the run after seq ``after``, following the cursor pages."""
        events: list[dict[str, Any]] = []
        page = self.call("GET", f"/api/runs/{run_id}/events/", params={"after": after})
        while True:
            events += page["results"]
            if not page["next"]:
                return events
            page = self.session.get(page["next"], timeout=self.timeout).json()


def choose_answer(question: dict[str, Any], answers: dict[str, Any]) -> Any:
    """The answer to an interrupt's question: given by field, else the first offered choice,
    else the middle of the allowed range."""
    if question.get("field") in answers:
        return answers[question["field"]]
    if question.get("choices"):
        return question["choices"][0]
    low = (question.get("constraints") or {}).get("min")
    high = (question.get("constraints") or {}).get("max")
    if low is not None and high is not None:
        return (low + high) / 2
    raise SystemExit(f"no answer for {question.get('field')!r}: pass --answer FIELD=VALUE")


def drive(client: Planwatch, answers: dict[str, Any], run_input: dict[str, Any],
          timeout: float = 120, poll: float = 0.2) -> dict[str, Any]:
    """Start a run, answer each question it asks until it finishes; return the run."""
    run = client.call("POST", "/api/runs/", json={"graph": "acquisition", "input": run_input})
    print(f"started run {run['id']}", file=sys.stderr)
    seen, deadline = 0, time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.call("GET", f"/api/runs/{run['id']}/")
        for event in client.events(run["id"], after=seen):  # read after the status: all
            seen = event["seq"]                             # of a finished run's events
            print(f"  #{event['seq']} {event['kind']} {event['node']}".rstrip(), file=sys.stderr)
        if run["status"] in FINISHED:
            return run
        if run["status"] == "interrupted":
            pending = client.call("GET", "/api/interrupts/", params={"run": run["id"]})
            for interrupt in pending["results"]:
                question = interrupt["payload"]
                answer = choose_answer(question, answers)
                print(f"  ? {question.get('prompt')} -> {answer!r}", file=sys.stderr)
                client.call("POST", f"/api/interrupts/{interrupt['id']}/answer/",
                            json={"answer": answer})
        time.sleep(poll)
    raise SystemExit(f"run {run['id']} still {run['status']} after {timeout} s")


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, drive one run, print its output."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--token", required=True)
    parser.add_argument("--answer", action="append", default=[], metavar="FIELD=VALUE",
                        help="answer for a question's field (JSON values are parsed)")
    parser.add_argument("--input", default="{}", help="the run's start input, as JSON")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args(argv)
    answers = dict(ANSWERS)
    for item in args.answer:
        field, _, raw = item.partition("=")
        try:
            answers[field] = json.loads(raw)
        except ValueError:
            answers[field] = raw
    try:
        run = drive(Planwatch(args.url, args.token), answers, json.loads(args.input),
                    timeout=args.timeout)
    except ApiError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"id": run["id"], "status": run["status"], "output": run["output"],
                      "error": run["error_message"]}, indent=2))
    return 0 if run["status"] == "succeeded" else 2


if __name__ == "__main__":
    sys.exit(main())
