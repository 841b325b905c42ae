"""Schema post-processing: the error responses every operation can give; graph names."""

from __future__ import annotations

from typing import Any

from planner.registry import all_graphs

ERROR = {
    "type": "object",
    "description": "An error: `detail` says what is wrong and names the bad field.",
    "properties": {
        "detail": {"type": "string"},
        "code": {"type": "string"},
        "errors": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["detail", "code", "errors"],
}

REASONS = {
    "400": "Bad input; `detail` names the field.",
    "401": "Not authenticated: send `Authorization: Token <key>` or a session cookie.",
    "403": "Signed in without the permission this action needs (or a missing CSRF token).",
    "404": "No such resource.",
    "405": "Method not allowed.",
    "406": "Cannot render the requested media type.",
    "409": "The run or interrupt is not in a state that allows this.",
    "413": "Request body larger than DATA_UPLOAD_MAX_MEMORY_SIZE.",
    "415": "Unsupported media type: send application/json.",
    "422": "A budget that cannot be taken; `errors` names the field (`budget.max_tokens`).",
}

TAKES_BUDGETS = frozenset({"runs_create", "runs_budget_create"})
"""The operations whose body carries a budget (a bad one: 422)."""


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool
                        ) -> dict[str, Any]:
    """Add the shared ``Error`` component and the 4xx responses to every operation.

    Also name the registered graphs (known only at run time) as the start request's enum.
    """
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = ERROR
    if "RunCreateRequest" in schemas:
        schemas["RunCreateRequest"]["properties"]["graph"]["enum"] = [
            spec.name for spec in all_graphs()]
    ref = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for item in result.get("paths", {}).values():
        for method, operation in item.items():
            codes = ["400", "401", "403", "404", "405", "406"]
            if method in ("post", "put", "patch"):
                codes += ["409", "413", "415"]
            if operation.get("operationId") in TAKES_BUDGETS:
                codes.append("422")
            responses = operation.setdefault("responses", {})
            for code in codes:
                responses.setdefault(code, {"description": REASONS[code], "content": ref})
    return result
