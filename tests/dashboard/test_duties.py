"""Background duties wherever the application is served: a plain ``daphne
config.asgi:application`` (as Channels documents it, no ``manage.py serve``) fires a due
cron and says on ``/readyz`` that its duties go round; a process that serves nothing says
it runs none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.request import urlopen

import pytest

from dashboard import crons, health
from dashboard.models import Run
from tests.conftest import ARTIFACTS, ROOT, free_port, wait_serving
from tests.support.lgserver import EVERY_SECOND, wait_for
from tests.support.processes import kill, process_env

pytestmark = [pytest.mark.server, pytest.mark.django_db(transaction=True)]


def test_plain_daphne_fires_a_due_cron_and_reports_its_duties(operator):
    cron = crons.cron_create(assistant_id="test.echo", schedule=EVERY_SECOND, user=operator,
                             thread=None, payload={"input": {"steps": 1}})
    port = free_port()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = (ARTIFACTS / "plain-daphne.log").open("w")
    daphne = Path(sys.executable).with_name("daphne")
    proc = subprocess.Popen(
        [str(daphne), "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"],
        cwd=ROOT, env=process_env(PLANWATCH_CRON_POLL_SECONDS="0.2"), stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True)
    try:
        assert wait_serving(proc, port), f"daphne did not start; see {log.name}"
        fired = wait_for(lambda: Run.objects.filter(metadata__cron_id=str(cron.id)).first(),
                         timeout=60)
        assert fired.graph == "test.echo"
        with urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as response:
            duties = json.load(response)["checks"]["duties"]
        assert duties["ok"] is True and duties["crons"]["ok"] is True
        assert duties["crons"]["last_round_age"] is not None
    finally:
        kill(proc)
        log.close()


def test_a_process_that_serves_nothing_says_it_runs_no_duties():
    check = health.check_duties()
    assert check.ok and check.detail == {"running": False, "role": "command"}


def test_a_web_process_whose_duties_do_not_run_says_so_on_readyz_and_the_crons_page(
        client, operator, settings):
    settings.PROCESS_ROLE = "web"  # served, but nothing started its duties (this process)
    ready = health.readiness()
    assert ready.down == ["duties"]
    assert "not running in this process" in ready.as_json()["checks"]["duties"]["crons"][
        "error"]
    client.force_login(operator)
    page = client.get("/crons/").content.decode()
    assert "No cron fires from this process" in page and "not running in this process" in page
