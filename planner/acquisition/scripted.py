"""The scripted offline model's answers for the acquisition planner.

It behaves like a careful planner would: fields in profile order (region and currency are
settled by ``bootstrap_gate`` before the model is consulted), web-preferred fields
searched with a specific query before asking, and ``finish`` once nothing is left.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.llm import scripted_responder
from planner.search import tokens


@scripted_responder("acquisition.decide")
def decide(context: Mapping[str, Any]) -> dict[str, Any]:
    """The next action for the first missing field that can still be acquired."""
    run = set(context.get("queries_run", []))
    for field in context.get("fields", []):
        if not field["missing"] or field["strategy"] == "derived":
            continue
        if field["next_step"] == "search":
            queries = [q for q in field["query_templates"]
                       if " ".join(tokens(q)) not in run]
            if queries:
                return {"action": "search", "field": field["name"], "query": queries[0],
                        "reason": f"{field['label']} is usually published; search first"}
        if field["next_step"] in ("search", "ask_user"):
            return {"action": "ask_user", "field": field["name"], "query": None,
                    "reason": f"{field['label']} is an assumption only the operator can make"
                    if field["strategy"] == "ask" else
                    f"searching did not find {field['label']}; ask the operator"}
    return {"action": "finish", "field": None, "query": None,
            "reason": "all inputs are known; the estimate can be completed"}
