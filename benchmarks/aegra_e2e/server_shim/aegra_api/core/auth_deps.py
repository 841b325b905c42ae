"""Stands in for Aegra's ``aegra_api.core.auth_deps`` (the e2e harness only):
``require_auth`` gives the user Planwatch signed in for a custom route (with
``enable_custom_route_auth`` in the langgraph.json), or refuses the request (401)."""

from typing import Any

from fastapi import HTTPException, Request

from aegra_api.models.auth import User


async def require_auth(request: Request) -> User:
    """The signed-in caller (Planwatch's ``request.user``), or 401."""
    user: Any = request.scope.get("user")
    if user is None or not getattr(user, "is_authenticated", False):
        raise HTTPException(status_code=401, detail="Authentication required: set "
                            "enable_custom_route_auth in langgraph.json and send an API token")
    return User(identity=user.identity, display_name=user.display_name,
                permissions=list(user.permissions))
