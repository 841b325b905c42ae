"""What every page of one run starts with: the run, or a 404/403 that says why."""

from __future__ import annotations

from uuid import UUID

from django.http import Http404, HttpRequest

from dashboard import selectors
from dashboard.models import Run


def run_or_404(request: HttpRequest, run_id: UUID) -> Run:
    """The run ``run_id`` if the user may view it (:mod:`dashboard.policy`); else Http404."""
    try:
        run = selectors.run_get(run_id=run_id)
    except Run.DoesNotExist:
        raise Http404(f"no run {run_id}") from None
    if not selectors.run_can_view(user=request.user, run=run):
        raise Http404(f"no run {run_id}")  # another user's run does not exist for them
    return run
