"""The unmanaged Checkpoint model, and indexes on the saver's table for the admin's reads.

The saver's primary key is (thread_id, checkpoint_ns, checkpoint_id); the admin lists
newest first across all threads, per thread (and by thread id prefix) and per source, so
it needs indexes led by those. ``IF NOT EXISTS`` keeps this safe to re-run.
"""

from django.db import migrations, models

POSTGRES_INDEXES = [
    "CREATE INDEX IF NOT EXISTS checkpoints_admin_id ON checkpoints (checkpoint_id)",
    "CREATE INDEX IF NOT EXISTS checkpoints_admin_thread ON checkpoints "
    "(thread_id text_pattern_ops, checkpoint_id)",
    "CREATE INDEX IF NOT EXISTS checkpoints_admin_source ON checkpoints "
    "((metadata ->> 'source'), checkpoint_id)",
]
SQLITE_INDEXES = [
    "CREATE INDEX IF NOT EXISTS checkpoints_admin_id ON checkpoints (checkpoint_id)",
    "CREATE INDEX IF NOT EXISTS checkpoints_admin_thread ON checkpoints "
    "(thread_id, checkpoint_id)",
]
NAMES = ["checkpoints_admin_id", "checkpoints_admin_thread", "checkpoints_admin_source"]


def create_indexes(apps, schema_editor):
    """Index the saver's checkpoints table for the admin's list queries."""
    vendor = schema_editor.connection.vendor
    for sql in POSTGRES_INDEXES if vendor == "postgresql" else SQLITE_INDEXES:
        schema_editor.execute(sql)


def drop_indexes(apps, schema_editor):
    """Drop the admin's indexes again."""
    for name in NAMES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("dashboard", "0002_checkpoint_tables")]
    operations = [
        migrations.CreateModel(
            name="Checkpoint",
            fields=[
                ("checkpoint_id", models.TextField(primary_key=True, serialize=False)),
                ("thread_id", models.TextField()),
                ("checkpoint_ns", models.TextField(blank=True)),
                ("parent_checkpoint_id", models.TextField(blank=True, null=True)),
                ("type", models.TextField(blank=True, null=True)),
                ("metadata", models.JSONField(default=dict)),
            ],
            options={
                "db_table": "checkpoints",
                "ordering": ["-checkpoint_id"],
                "default_permissions": ("view",),
                "managed": False,
            },
        ),
        migrations.RunPython(create_indexes, drop_indexes),
    ]
