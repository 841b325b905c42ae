"""One running run per thread (a partial unique constraint), indexes for thread search and
run lists, and the "see all threads" permission of the LangGraph API."""

from django.conf import settings
from django.db import migrations, models


def stop_extra_running(apps, schema_editor):
    """A thread with several running runs (the race this migration closes) keeps its newest
    running; the others fail, saying why, so the constraint can be created."""
    Run = apps.get_model("dashboard", "Run")
    seen = set()
    for run in (Run.objects.filter(status="running", conversation__isnull=False)
                .order_by("conversation_id", "-created_at").only("id", "conversation_id")):
        if run.conversation_id in seen:
            Run.objects.filter(id=run.id).update(
                status="failed", owner="",
                error_message="stopped by migration 0011: another run of its thread was "
                              "running at the same time; start it again")
        seen.add(run.conversation_id)


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0009_threads'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='thread',
            options={'ordering': ['-created_at'], 'permissions': [('view_all_threads', 'Can see and act on every thread through the LangGraph API')]},
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['conversation', '-created_at'], name='run_thread_created'),
        ),
        migrations.AddIndex(
            model_name='thread',
            index=models.Index(fields=['created_by', '-created_at'], name='thread_owner_created'),
        ),
        migrations.RunPython(stop_extra_running, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='run',
            constraint=models.UniqueConstraint(condition=models.Q(('status', 'running')), fields=('conversation',), name='run_one_running_per_thread'),
        ),
    ]
