"""Cursor pagination: stable pages while runs and events keep arriving."""

from __future__ import annotations

from rest_framework.pagination import CursorPagination


class RunCursorPagination(CursorPagination):
    """Runs, newest first."""

    ordering = ("-created_at", "-id")
    page_size = 25
    page_size_query_param = "page_size"
    max_page_size = 200


class EventCursorPagination(CursorPagination):
    """A run's events in seq order."""

    ordering = ("seq",)
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000


class InterruptCursorPagination(CursorPagination):
    """Pending interrupts, oldest first (the order an operator should answer them)."""

    ordering = ("created_at", "id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
