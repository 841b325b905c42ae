"""An ordinary 4xx is an answer, not a warning: only server errors are logged."""

from __future__ import annotations

import logging
import uuid

import pytest


@pytest.mark.django_db
def test_a_missing_page_is_not_logged_as_a_warning(client, operator, caplog):
    client.force_login(operator)
    with caplog.at_level(logging.DEBUG):
        response = client.get(f"/runs/{uuid.uuid4()}/")
    assert response.status_code == 404
    assert not [r for r in caplog.records if r.name == "django.request"
                and r.levelno >= logging.WARNING]
    assert logging.getLogger("django.request").getEffectiveLevel() == logging.ERROR
