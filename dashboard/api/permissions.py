"""The pages' permissions as DRF policies: start, cancel and answer are separate rights."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission


class _ModelPermission(BasePermission):
    """Allow only users holding ``perm``; the message names the permission to ask for."""

    perm = ""
    what = ""

    @property
    def message(self) -> str:  # type: ignore[override]
        """Say which permission is missing and who can grant it."""
        return (f"{self.what} needs the {self.perm!r} permission; ask an administrator "
                "to grant it")

    def has_permission(self, request: Any, view: Any) -> bool:
        """Whether the signed-in user holds ``perm``."""
        return bool(request.user and request.user.has_perm(self.perm))


class CanStartRuns(_ModelPermission):
    """Starting runs (``dashboard.start_run``)."""

    perm = "dashboard.start_run"
    what = "starting a run"


class CanCancelRuns(_ModelPermission):
    """Cancelling runs (``dashboard.cancel_run``)."""

    perm = "dashboard.cancel_run"
    what = "cancelling a run"


class CanAnswerInterrupts(_ModelPermission):
    """Answering interrupts (``dashboard.answer_interrupt``)."""

    perm = "dashboard.answer_interrupt"
    what = "answering an interrupt"


class CanDebugRuns(_ModelPermission):
    """Breakpoints, continue and step (``dashboard.debug_run``)."""

    perm = "dashboard.debug_run"
    what = "setting breakpoints, continuing or stepping a run"


class CanForkRuns(_ModelPermission):
    """Forking runs and editing their state (``dashboard.fork_run``)."""

    perm = "dashboard.fork_run"
    what = "forking a run or editing its state"
