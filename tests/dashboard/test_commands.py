"""Management commands: the first operator."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command
from django.test import RequestFactory

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("ensure_operator", *args, stdout=out)
    return out.getvalue()


def test_first_operator_gets_a_generated_password_printed_once(monkeypatch):
    monkeypatch.delenv("PLANWATCH_ADMIN_PASSWORD", raising=False)
    output = run()
    password = output.split("password: ")[1].split()[0]
    assert len(password) >= 12
    user = authenticate(RequestFactory().post("/accounts/login/"), username="admin",
                        password=password)
    assert user is not None and user.is_superuser
    assert "none created" in run()  # a second start creates nobody and prints no password


def test_password_from_environment_is_used_and_not_printed(monkeypatch):
    monkeypatch.setenv("PLANWATCH_ADMIN_PASSWORD", "from-the-env-9931")
    output = run("--username", "root-op")
    assert "from-the-env-9931" not in output
    assert authenticate(RequestFactory().post("/accounts/login/"), username="root-op",
                        password="from-the-env-9931") is not None


def test_no_operator_is_created_when_users_exist(django_user_model):
    django_user_model.objects.create_user(username="someone", password="x-12345678")
    assert "none created" in run()
    assert get_user_model().objects.count() == 1
