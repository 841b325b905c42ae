"""Issue 29: a run's recursion limit, kept on the run for every execution."""

from django.db import migrations, models


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
    ]
