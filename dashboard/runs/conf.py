"""The engine's settings: one entry of ``settings.PLANWATCH``, read where it is used."""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings


def planwatch_setting(name: str) -> Any:
    """``settings.PLANWATCH[name]`` (the settings module validates the values)."""
    return cast(dict[str, Any], settings.PLANWATCH)[name]
