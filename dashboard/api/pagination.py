"""Cursor pagination: stable pages while runs and events keep arriving."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request


class StrictCursorPagination(CursorPagination):
    """Cursor pages whose ``page_size`` is checked (DRF silently ignores a bad one)."""

    page_size_query_param = "page_size"

    def paginate_queryset(self, queryset: Any, request: Request,
                          view: Any = None) -> list[Any] | None:
        """A page; 404 for a cursor whose position is not a value of the ordering's field
        (a crafted one, such as ``p=2026-99-99``), as DRF answers a garbled cursor."""
        try:
            return super().paginate_queryset(queryset, request, view)
        except (DjangoValidationError, ValueError, TypeError, OverflowError):
            raise NotFound(f"{self.invalid_cursor_message} (its position is not a value "
                           "of the list's order); start again from the first page") from None

    def get_page_size(self, request: Request) -> int:
        """The requested page size, or a 400 naming ``page_size`` and the allowed range."""
        raw = request.query_params.get(self.page_size_query_param)
        default, largest = int(self.page_size or 1), int(self.max_page_size or 1)
        if raw is None:
            return default
        allowed = f"give a whole number from 1 to {largest}"
        try:
            size = int(raw)
        except ValueError:
            raise ValidationError({"page_size": f"{raw!r} is not a whole number; {allowed}"}) \
                from None
        if not 1 <= size <= largest:
            raise ValidationError({"page_size": f"{size} is out of range; {allowed}"})
        return size

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        """Document the page size's range."""
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_page_size)
        return parameters


class RunCursorPagination(StrictCursorPagination):
    """Runs, newest first."""

    ordering = ("-created_at", "-id")
    page_size = 25
    max_page_size = 200


class EventCursorPagination(StrictCursorPagination):
    """A run's events in seq order."""

    ordering = ("seq",)
    page_size = 100
    max_page_size = 1000


class InterruptCursorPagination(StrictCursorPagination):
    """Pending interrupts, oldest first (the order an operator should answer them)."""

    ordering = ("created_at", "id")
    page_size = 50
    max_page_size = 200
