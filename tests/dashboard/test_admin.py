"""The admin audit: real runs' checkpoints decoded, links between records, read-only for all."""

from __future__ import annotations

import html
import uuid

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dashboard import services
from dashboard.admin import CheckpointAdmin
from dashboard.admin.base import changelist_url, trace_url
from dashboard.models import Checkpoint, Interrupt, Run, Thread
from tests.conftest import wait_run

pytestmark = pytest.mark.pg

VIEW_PERMS = ["view_run", "view_runevent", "view_interrupt", "view_checkpoint"]


@pytest.fixture
def auditor(django_user_model):
    """A staff member who may view every audited model (and nothing else)."""
    user = django_user_model.objects.create_user(username="audrey", password="pw-audrey-1234",
                                                 is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=VIEW_PERMS))
    return user


def page(client, url: str) -> str:
    """GET ``url`` and return its text with HTML entities decoded."""
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return html.unescape(response.content.decode())


def checkpoint_url(checkpoint_id: str) -> str:
    return reverse("admin:dashboard_checkpoint_change", args=[checkpoint_id])


def finished_echo(operator, **input) -> Run:
    run = services.run_create(graph="test.echo", input=input, user=operator)
    return wait_run(run.id)


def by_step(run: Run) -> dict[int, Checkpoint]:
    rows = Checkpoint.objects.filter(thread_id=run.thread_id, checkpoint_ns="")
    return {row.metadata["step"]: row for row in rows}


def test_the_checkpoint_list_shows_a_real_runs_checkpoints(executor, operator, auditor, client):
    run = finished_echo(operator, steps=3)
    steps = by_step(run)
    assert sorted(steps) == [-1, 0, 1, 2, 3, 4]
    client.force_login(auditor)
    url = reverse("admin:dashboard_checkpoint_changelist") + f"?thread={run.thread_id}"
    text = page(client, url)
    for row in steps.values():
        assert checkpoint_url(row.checkpoint_id) in text
    # newest first: the last step's checkpoint precedes the input checkpoint
    assert text.index(steps[4].checkpoint_id) < text.index(steps[-1].checkpoint_id)
    assert "6 checkpoints" in text
    rows = text.split('<tr')
    row_of = {s: next(r for r in rows if f'field-checkpoint"><a href="{checkpoint_url(c.pk)}' in r)
              for s, c in steps.items()}
    assert ">input<" in row_of[-1] and ">loop<" in row_of[2]
    assert ">step<" in row_of[2] and ">done<" in row_of[4]  # the nodes whose writes it holds
    assert ">__start__<" in row_of[0]


def test_a_checkpoint_detail_decodes_values_and_diffs_against_its_parent(
        executor, operator, auditor, client):
    run = finished_echo(operator, steps=3)
    steps = by_step(run)
    client.force_login(auditor)
    text = page(client, checkpoint_url(steps[2].checkpoint_id))
    # channel values decoded by the saver's own serializer, as readable JSON
    assert '"n": 2,' in text and '"steps": 3' in text
    assert '"trail": [\n    "step1",\n    "step2"\n  ]' in text
    # the diff against the parent (step 1): n changed 1 → 2, "step2" appended to the trail
    assert ('<tr class="pw-diff-changed"><td>n</td><td>changed</td>'
            '<td><pre class="pw-json">1</pre></td><td><pre class="pw-json">2</pre></td></tr>'
            ) in text
    assert ('<tr class="pw-diff-appended"><td>trail</td><td>appended</td><td></td>'
            '<td><pre class="pw-json">[\n  "step2"\n]</pre></td></tr>') in text
    assert '<tr class="pw-diff-removed">' not in text and text.count("<tr class=\"pw-diff-") == 2
    # links: parent, child, run and the trace view at that step
    assert checkpoint_url(steps[1].checkpoint_id) in text
    assert checkpoint_url(steps[3].checkpoint_id) in text
    assert reverse("admin:dashboard_run_change", args=[run.id]) in text
    seq = run.events.get(kind="checkpoint", checkpoint_id=steps[2].checkpoint_id).seq
    assert trace_url(run.id, at=seq) == f"/runs/{run.id}/?at={seq}"
    assert f'href="/runs/{run.id}/?at={seq}"' in text
    assert '"source": "loop"' in text and '"step": 2' in text


def test_the_interrupt_audit_trail_links_the_checkpoint_resumed_from(
        executor, operator, auditor, client):
    run = finished_echo(operator, steps=4, ask=True)
    asked = run.interrupts.get()
    client.force_login(auditor)
    pending = Checkpoint.objects.filter(thread_id=run.thread_id).order_by("-checkpoint_id")[0]
    text = page(client, checkpoint_url(pending.checkpoint_id))
    assert '"prompt": "Say something"' in text  # the interrupt pending at that checkpoint
    assert "__interrupt__" in text

    services.run_resume(run=run, answers={asked.interrupt_id: "hello"}, user=operator)
    wait_run(run.id, statuses=("succeeded", "failed"))
    asked.refresh_from_db()
    assert asked.status == Interrupt.Status.ANSWERED and asked.checkpoint_id
    text = page(client, reverse("admin:dashboard_interrupt_change", args=[asked.pk]))
    assert "Audit trail" in text and "olga" in text and '"hello"' in text
    assert checkpoint_url(asked.checkpoint_id) in text
    assert reverse("admin:dashboard_run_change", args=[run.id]) in text
    text = page(client, checkpoint_url(asked.checkpoint_id))
    assert reverse("admin:dashboard_interrupt_change", args=[asked.pk]) in text
    # the answer made a LangGraph run of its own: listed with the run, and a checkpoint it
    # wrote (naming it) links the run
    started, resumed = run.langgraph_runs.order_by("first_seq")
    text = page(client, reverse("admin:dashboard_run_change", args=[run.id]))
    assert f"{str(started.id)[:8]} · interrupted · from seq 1" in text
    assert f"{str(resumed.id)[:8]} · success · from seq {resumed.first_seq}" in text
    newest = Checkpoint.objects.filter(thread_id=run.thread_id).order_by("-checkpoint_id")[0]
    assert reverse("admin:dashboard_run_change", args=[run.id]) in page(
        client, checkpoint_url(newest.checkpoint_id))


def test_runs_events_and_interrupts_link_to_each_other(executor, operator, auditor, client):
    run = finished_echo(operator, steps=2)
    other = finished_echo(operator, steps=1)
    client.force_login(auditor)
    text = page(client, reverse("admin:dashboard_run_changelist") + f"?q={str(run.id)[:13]}")
    assert changelist_url("runevent", run__id__exact=run.id) in text
    assert changelist_url("interrupt", run__id__exact=run.id) in text
    assert changelist_url("checkpoint", thread=run.thread_id) in text
    assert trace_url(run.id) in text and str(other.id)[:8] not in text
    text = page(client, reverse("admin:dashboard_runevent_changelist")
                + f"?run__id__exact={run.id}&kind__exact=checkpoint")
    for row in by_step(run).values():
        assert checkpoint_url(row.checkpoint_id) in text
    assert reverse("admin:dashboard_run_change", args=[other.id]) not in text
    text = page(client, reverse("admin:dashboard_runevent_changelist") + "?q=done")
    assert "done" in text


def test_the_checkpoint_list_never_counts_the_whole_table(executor, operator, auditor, client):
    finished_echo(operator, steps=3)
    client.force_login(auditor)
    with CaptureQueriesContext(connection) as queries:
        page(client, reverse("admin:dashboard_checkpoint_changelist"))
        page(client, reverse("admin:dashboard_checkpoint_changelist") + "?source=loop&q=x")
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()
              and "checkpoints" in q["sql"]]
    assert counts and all("LIMIT" in sql.upper() for sql in counts), counts


def test_a_capped_count_says_more_than(executor, operator, auditor, client, monkeypatch):
    finished_echo(operator, steps=3)
    client.force_login(auditor)
    monkeypatch.setattr(CheckpointAdmin, "list_per_page", 1)
    monkeypatch.setattr(CheckpointAdmin, "pages_ahead", 1)
    text = page(client, reverse("admin:dashboard_checkpoint_changelist") + "?q=")
    assert "more than 2 checkpoints" in text and "more than 2 results" in text
    total = Checkpoint.objects.count()  # the saver's table outlives Django's test flushes
    text = page(client, reverse("admin:dashboard_checkpoint_changelist") + f"?p={total}")
    assert f"{total} checkpoints" in text and "more than" not in text


def test_a_thread_lists_its_runs_and_who_opened_it(executor, operator, client,
                                                  django_user_model):
    run = finished_echo(operator, steps=2)
    root = django_user_model.objects.create_superuser(username="root", password="x")
    client.force_login(root)
    listed = page(client, reverse("admin:dashboard_thread_changelist") + f"?q={str(run.id)[:8]}")
    assert str(run.id)[:8] in listed and "olga" in listed
    runs = page(client, reverse("admin:dashboard_run_changelist")
                + f"?conversation__id__exact={run.conversation_id}")
    assert str(run.id)[:8] in runs
    assert "0 threads" not in page(client, reverse("admin:dashboard_thread_changelist")
                                   + "?q=test.echo")


def test_bad_input_is_an_answer_not_an_error(executor, auditor, client):
    client.force_login(auditor)
    url = reverse("admin:dashboard_checkpoint_changelist")
    assert client.get(url + "?p=abc").status_code == 200
    assert client.get(url + "?p=999").status_code in (200, 302)
    assert client.get(url + "?source=nonsense").status_code == 200
    assert client.get(checkpoint_url("no-such-checkpoint")).status_code == 302


def test_only_staff_with_view_permission_may_audit(executor, operator, client,
                                                   django_user_model):
    run = finished_echo(operator, steps=1)
    row = by_step(run)[1]
    urls = [reverse("admin:dashboard_checkpoint_changelist"), checkpoint_url(row.checkpoint_id),
            reverse("admin:dashboard_run_changelist"),
            reverse("admin:dashboard_interrupt_changelist")]
    client.force_login(operator)  # may start, answer and cancel, but is not staff
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
    staff = django_user_model.objects.create_user(username="stan", password="x", is_staff=True)
    client.force_login(staff)
    for url in urls:
        assert client.get(url).status_code == 403, url
    staff.user_permissions.add(Permission.objects.get(codename="view_run"))
    client.force_login(staff)
    assert client.get(urls[2]).status_code == 200
    assert client.get(urls[0]).status_code == 403  # runs yes, checkpoints still no


@pytest.mark.parametrize("model", ["checkpoint", "run", "runevent", "interrupt", "thread"])
def test_nobody_adds_changes_or_deletes_not_even_a_superuser(
        model, executor, operator, client, django_user_model):
    run = finished_echo(operator, steps=2, ask=True)
    pk = {"checkpoint": by_step(run)[1].checkpoint_id, "run": run.id,
          "runevent": run.events.first().pk, "interrupt": run.interrupts.get().pk,
          "thread": run.conversation_id}[model]
    root = django_user_model.objects.create_superuser(username="root", password="x")
    client.force_login(root)
    changelist = reverse(f"admin:dashboard_{model}_changelist")
    add = reverse(f"admin:dashboard_{model}_add")
    change = reverse(f"admin:dashboard_{model}_change", args=[pk])
    delete = reverse(f"admin:dashboard_{model}_delete", args=[pk])
    text = page(client, changelist)
    assert 'name="action"' not in text and add not in text  # no actions, no "add" button
    assert client.get(add).status_code == 403
    assert client.post(add, {}).status_code == 403
    text = page(client, change)  # the change URL is a read-only view
    assert 'name="_save"' not in text and delete not in text
    assert client.post(change, {"thread_id": "x", "status": "failed"}).status_code == 403
    assert client.get(delete).status_code == 403
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert client.post(changelist, {"action": "delete_selected", "_selected_action": [pk],
                                    "post": "yes"}).status_code in (200, 302, 403)
    model_class = {"checkpoint": Checkpoint, "run": Run, "thread": Thread,
                   "runevent": run.events.model, "interrupt": Interrupt}[model]
    assert model_class.objects.filter(pk=pk).exists()
    run.refresh_from_db()
    assert run.status == Run.Status.INTERRUPTED


def test_a_checkpoint_the_saver_cannot_decode_is_reported_not_a_500(transactional_db, auditor,
                                                                     client):
    broken = f"broken-{uuid.uuid4()}"
    body = "'\"not an object\"'" if connection.vendor == "postgresql" else "X'c1'"
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint, "
            f"metadata) VALUES ('broken:planner', '', '{broken}', 'msgpack', {body}, "
            "'{\"source\": \"loop\", \"step\": 1}')"
        )
    client.force_login(auditor)
    text = page(client, checkpoint_url(broken))
    assert "The saver could not decode this checkpoint" in text
    assert "broken:planner" in text and "no run on this thread" in text
