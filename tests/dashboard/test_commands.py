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


@pytest.mark.django_db(transaction=True)
def test_start_run_follows_every_event_of_the_run_until_it_ends(executor):
    from dashboard.models import Run

    out = StringIO()
    call_command("start_run", "test.echo", "--input", '{"steps": 3}', "--follow", stdout=out)
    lines = out.getvalue().splitlines()
    run = Run.objects.get(id=lines[0])
    assert run.status == Run.Status.SUCCEEDED
    printed = [int(line.split()[0].lstrip("#")) for line in lines if line.startswith("#")]
    assert printed == list(range(1, run.last_seq + 1))  # every row once, in order
    assert f"run {run.id} succeeded" in lines
