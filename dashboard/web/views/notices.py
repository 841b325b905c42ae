"""An e-mailed notice's one-time link to its question (a login first, as for any page)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from dashboard import notices

TITLES = {403: "Not your link", 404: "No such question", 410: "Link spent"}


def notice_link(request: HttpRequest, token: str) -> HttpResponse:
    """Open the question an e-mail told its recipient of: once, as that recipient."""
    try:
        interrupt = notices.notice_link_open(token=token, user=request.user)
    except notices.LinkRefused as refused:
        return TemplateResponse(request, "_error.html", {
            "error_title": TITLES.get(refused.status, "Link refused"),
            "error_code": refused.status, "error_text": refused.message,
        }, status=refused.status)
    return HttpResponseRedirect(notices.question_path(interrupt))
