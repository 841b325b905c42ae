"""Issue 41, stage b: the LangGraph run, a row per run request of LangGraph's API, named
apart from the operator's ``Run``. Every run made before gets its one LangGraph run, with
the run's own id (so every run id handed out stays valid), its events from seq 1 and its
creation time: a resume or a continue was not yet a run request of its own then.
"""

import uuid

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


def one_langgraph_run_per_run(apps, schema_editor):
    """Each run's one LangGraph run, in one statement (the same on both databases)."""
    runs = apps.get_model("dashboard", "Run")._meta.db_table
    langgraph_runs = apps.get_model("dashboard", "LangGraphRun")._meta.db_table
    quote = schema_editor.quote_name
    schema_editor.execute(
        f"INSERT INTO {quote(langgraph_runs)} (id, run_id, first_seq, created_at, "
        f"superseded_at) SELECT id, id, 1, created_at, NULL FROM {quote(runs)}")


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0029_merge_one_checkpoint_thread'),
    ]

    operations = [
        migrations.CreateModel(
            name='LangGraphRun',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('first_seq', models.PositiveIntegerField(help_text="The first seq of its Run's event log that is its (the one after the request).")),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('superseded_at', models.DateTimeField(blank=True, help_text='When the next LangGraph run of its Run went on after it (a resume or a continue); null while it is the latest.', null=True)),
                ('run', models.ForeignKey(help_text="The operator's run it is a part of.", on_delete=django.db.models.deletion.CASCADE, related_name='langgraph_runs', to='dashboard.run')),
            ],
            options={
                'ordering': ['created_at'],
                'constraints': [models.UniqueConstraint(fields=('run', 'first_seq'), name='langgraphrun_run_first_seq_unique'), models.UniqueConstraint(condition=models.Q(('superseded_at__isnull', True)), fields=('run',), name='langgraphrun_one_latest_per_run')],
            },
        ),
        migrations.RunPython(one_langgraph_run_per_run, migrations.RunPython.noop,
                             elidable=True),
    ]
