"""Replaces the suite's root conftest (its unit-test fixtures import Aegra's server): every
httpx client the tests make sends Planwatch's API key as ``x-api-key`` (the SDK reads
``LANGGRAPH_API_KEY`` itself)."""

import os
from typing import Any

import httpx

KEY = os.environ["LANGGRAPH_API_KEY"]


def _with_key(init: Any) -> Any:
    def patched(self: Any, *args: Any, **kwargs: Any) -> None:
        headers = dict(kwargs.pop("headers", None) or {})
        headers.setdefault("x-api-key", KEY)
        init(self, *args, headers=headers, **kwargs)

    return patched


for cls in (httpx.Client, httpx.AsyncClient):
    cls.__init__ = _with_key(cls.__init__)  # type: ignore[method-assign]
