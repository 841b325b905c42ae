"""A run's state is one field (``Run.state``, dashboard/runs/states.py): an answer or a
continue not yet taken up by an executor, which were read from interrupt rows and from
the kind of the run's last event, are states of their own (``resuming``, ``continuing``).
``Run.status``, what people and the APIs see, is generated from it by the database."""

from django.db import migrations, models
from django.db.models import Case, Exists, F, OuterRef, Value, When

SHOWN = Case(When(state="resuming", then=Value("interrupted")),
             When(state="continuing", then=Value("paused")), default=F("state"))


def states_from_statuses(apps, schema_editor):
    """Each run's state: its status, or resuming / continuing when an answer or a continue
    waits for an executor (as ``RunQuerySet.busy`` read them)."""
    Run = apps.get_model("dashboard", "Run")
    Interrupt = apps.get_model("dashboard", "Interrupt")
    RunEvent = apps.get_model("dashboard", "RunEvent")
    Run.objects.update(state=F("status"))
    Run.objects.filter(status="interrupted").filter(Exists(Interrupt.objects.filter(
        run=OuterRef("pk"), status="answered", taken_up_at__isnull=True))
    ).update(state="resuming")
    Run.objects.filter(status="paused").filter(Exists(RunEvent.objects.filter(
        run=OuterRef("pk"), seq=OuterRef("last_seq"), kind="run_continued"))
    ).update(state="continuing")


def statuses_from_states(apps, schema_editor):
    """Back: each run's status as its state shows it."""
    apps.get_model("dashboard", "Run").objects.update(status=SHOWN)


class Migration(migrations.Migration):

    dependencies = [
        ("dashboard", "0026_merge_event_at"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="run", name="run_status_valid"),
        migrations.RemoveConstraint(model_name="run", name="run_one_running_per_thread"),
        migrations.RemoveIndex(model_name="run", name="run_status_created"),
        migrations.AddField(
            model_name="run",
            name="state",
            field=models.CharField(choices=[
                ("queued", "Queued"), ("running", "Running"), ("interrupted", "Waiting for you"),
                ("resuming", "Resuming"), ("paused", "Paused"), ("continuing", "Continuing"),
                ("succeeded", "Succeeded"), ("failed", "Failed"), ("cancelled", "Cancelled")],
                default="queued", max_length=16),
        ),
        migrations.RunPython(states_from_statuses, statuses_from_states),
        migrations.RemoveField(model_name="run", name="status"),
        migrations.AddField(
            model_name="run",
            name="status",
            field=models.GeneratedField(
                choices=[("queued", "Queued"), ("running", "Running"),
                         ("interrupted", "Waiting for you"), ("paused", "Paused"),
                         ("succeeded", "Succeeded"), ("failed", "Failed"),
                         ("cancelled", "Cancelled")],
                db_persist=True, expression=SHOWN, output_field=models.CharField(max_length=16)),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["state", "-created_at"], name="run_state_created"),
        ),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.UniqueConstraint(
                condition=models.Q(("state", "running")), fields=("conversation",),
                name="run_one_running_per_thread"),
        ),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.CheckConstraint(
                condition=models.Q(("state__in", [
                    "queued", "running", "interrupted", "resuming", "paused", "continuing",
                    "succeeded", "failed", "cancelled"])),
                name="run_state_valid"),
        ),
    ]
