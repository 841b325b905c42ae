"""Issue 29: a run's recursion limit, kept on the run for every execution; a thread's
status as a column (written with its runs' transitions), filled here for existing threads."""

from django.db import migrations, models

# what dashboard.runs.transitions.THREAD_STATUS says, as of this migration
THREAD_STATUS = {"queued": "busy", "running": "busy", "interrupted": "interrupted",
                 "paused": "interrupted", "failed": "error", "succeeded": "idle",
                 "cancelled": "idle"}


def fill_thread_status(apps, schema_editor):
    """Each thread's status from its latest run (busy while runs are enqueued on it)."""
    Thread = apps.get_model("dashboard", "Thread")
    Run = apps.get_model("dashboard", "Run")
    for thread in Thread.objects.only("id").iterator():
        runs = Run.objects.filter(conversation_id=thread.id)
        waiting = runs.filter(status="queued", waits_for__isnull=False)
        latest = (runs.exclude(status="queued", waits_for__isnull=False)
                  .order_by("-created_at").values_list("status", flat=True).first())
        status = "busy" if waiting.exists() else THREAD_STATUS.get(latest or "", "idle")
        if status != "idle":
            Thread.objects.filter(id=thread.id).update(status=status)


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0017_merge_model_rollups'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='recursion_limit',
            field=models.PositiveIntegerField(blank=True, help_text='The super-steps its graph may take, as the client asked (none: PLANWATCH_MAX_RECURSION_LIMIT); every execution of the run uses it.', null=True),
        ),
        migrations.AddField(
            model_name='thread',
            name='status',
            field=models.CharField(choices=[('idle', 'Idle'), ('busy', 'Busy'), ('interrupted', 'Interrupted'), ('error', 'Error')], default='idle', max_length=16),
        ),
        migrations.AddIndex(
            model_name='thread',
            index=models.Index(fields=['status', '-created_at'], name='thread_status_created'),
        ),
        migrations.RunPython(fill_thread_status, migrations.RunPython.noop),
    ]
