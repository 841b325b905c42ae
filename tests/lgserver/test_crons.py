"""Crons through the official SDK: scheduled, searched, fired by the scheduler, deleted."""

from __future__ import annotations

import pytest
from langgraph_sdk.errors import NotFoundError, PermissionDeniedError, UnprocessableEntityError

from dashboard.models import Cron, Run
from tests.conftest import api_token
from tests.support.lgserver import EVERY_SECOND, wait_for

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]

def test_a_thread_cron_fires_on_its_thread_with_its_assistants_context(sdk):
    aid = sdk.assistants.create("agent", context={"model": "m-cron", "user": "dee"}
                                )["assistant_id"]
    thread = sdk.threads.create()
    cron = sdk.crons.create_for_thread(thread["thread_id"], aid, schedule=EVERY_SECOND,
                                       input={"remember": "nightly"})
    assert cron["schedule"] == EVERY_SECOND and cron["thread_id"] == thread["thread_id"]
    assert cron["next_run_date"] is not None
    run = wait_for(lambda: Run.objects.filter(conversation=thread["thread_id"],
                                              status="succeeded").first())
    assert str(run.assistant_id) == aid and run.metadata["cron_id"] == cron["cron_id"]
    assert sdk.threads.get_state(thread["thread_id"])["values"]["reply"] == "m-cron for dee"
    # the cron keeps firing (every second, enqueued on the thread): its last run is the
    # newest it fired, that one or a later one, on the same thread
    stored = Cron.objects.select_related("last_run").get(id=cron["cron_id"])
    last = stored.last_run
    assert last is not None and stored.last_run_date is not None
    assert str(last.conversation_id) == thread["thread_id"]
    assert last.metadata["cron_id"] == cron["cron_id"] and last.created_at >= run.created_at
    sdk.crons.delete(cron["cron_id"])
    assert not Cron.objects.filter(id=cron["cron_id"]).exists()


def test_a_stateless_cron_gets_a_thread_per_run_and_can_be_disabled(sdk):
    cron = sdk.crons.create("orders", schedule=EVERY_SECOND, input={"item": "tea"},
                            metadata={"team": "night"})
    wait_for(lambda: Run.objects.filter(metadata__cron_id=cron["cron_id"]).exists())
    updated = sdk.crons.update(cron["cron_id"], enabled=False, schedule="0 3 * * *")
    assert updated["enabled"] is False and updated["schedule"] == "0 3 * * *"
    assert sdk.crons.search(metadata={"team": "night"})[0]["cron_id"] == cron["cron_id"]
    assert sdk.crons.count(assistant_id="orders") == 1
    assert sdk.crons.search(assistant_id="acquisition") == []
    sdk.crons.delete(cron["cron_id"])
    with pytest.raises(NotFoundError):
        sdk.crons.delete(cron["cron_id"])


def test_bad_crons_get_a_422_and_viewers_only_read(sdk, lg_url, viewer):
    from langgraph_sdk import get_sync_client

    with pytest.raises(UnprocessableEntityError, match="schedule"):
        sdk.crons.create("orders", schedule="every night")
    with pytest.raises(NotFoundError, match="unknown graph"):
        sdk.crons.create("nope", schedule="0 3 * * *")
    with pytest.raises(UnprocessableEntityError, match="end_time"):
        sdk.http.post("/runs/crons", json={"assistant_id": "orders", "schedule": "0 3 * * *",
                                           "end_time": "tomorrow"})
    looker = get_sync_client(url=lg_url, api_key=api_token(viewer))
    assert looker.crons.search() == []
    with pytest.raises(PermissionDeniedError, match=r"dashboard\.start_run"):
        looker.crons.create("orders", schedule="0 3 * * *")


def test_the_crons_page_lists_next_and_last_run(sdk, sdk_user):
    from django.test import Client

    cron = sdk.crons.create("orders", schedule="0 3 * * *", input={"item": "tea"})
    web = Client()
    web.force_login(sdk_user)
    page = web.get("/crons/").content.decode()
    assert cron["cron_id"][:8] in page and "0 3 * * *" in page and "orders" in page
