"""A run's fencing token: ``Run.epoch``, moved on by every claim, and on PostgreSQL the
function a checkpoint write calls to prove, in its own transaction, that its run's epoch is
still the writer's (``dashboard.runs.savers``)."""

from django.db import migrations, models

FENCE_FUNCTION = """
CREATE OR REPLACE FUNCTION planwatch_fence(run uuid, held integer) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- a share lock until the write commits: a claim (an UPDATE of the row) waits for it,
    -- and a write that waited for a claim reads the epoch the claim left
    PERFORM 1 FROM dashboard_run WHERE id = run AND epoch = held FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % is no longer held at epoch %: another executor took it over; this execution stops',
            run, held USING ERRCODE = 'PWF01';
    END IF;
END
$$;
"""


def create_fence(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FENCE_FUNCTION, params=None)


def drop_fence(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP FUNCTION IF EXISTS planwatch_fence(uuid, integer)")


class Migration(migrations.Migration):

    dependencies = [
        ("dashboard", "0033_outcome_stored"),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='epoch',
            field=models.PositiveIntegerField(default=0, help_text="The fencing token of the run's claim: moved on by every claim, so a write of an executor that lost the run (its epoch behind) is refused."),
        ),
        migrations.RunPython(create_fence, drop_fence),
    ]
