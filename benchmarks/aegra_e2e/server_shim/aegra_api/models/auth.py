"""Stands in for Aegra's ``aegra_api.models.auth`` (the e2e harness only): its ``User``."""

from typing import Any

from pydantic import BaseModel, ConfigDict


class User(BaseModel):
    """The caller of a custom route, as Aegra's routes read it (extra fields allowed)."""

    model_config = ConfigDict(extra="allow")

    identity: str
    is_authenticated: bool = True
    permissions: list[str] = []
    display_name: str | None = None

    def __getattr__(self, name: str) -> Any:
        """An extra field, or None (Aegra's example reads ``role``, ``team_id`` …)."""
        extra = self.__pydantic_extra__ or {}
        return extra.get(name)
