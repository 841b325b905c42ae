"""Branch bounds (issue 50 point 4): a run's claims since it last stopped or wrote a
checkpoint (``Run.attempts``) and the error its last execution stopped on without ending
it (``Run.attempt_error``): past ``PLANWATCH_RUN_MAX_ATTEMPTS`` a run is failed naming
both, never recovered into the same fault for ever."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0034_merge_stop51'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='attempt_error',
            field=models.TextField(blank=True, default='', help_text='The error its last execution stopped on without ending the run (a database fault), named when the run is failed for it.'),
        ),
        migrations.AddField(
            model_name='run',
            name='attempts',
            field=models.PositiveIntegerField(default=0, help_text='Claims of the run since it last stopped or wrote a checkpoint (a start or resume is 1, each recovery one more); past PLANWATCH_RUN_MAX_ATTEMPTS the run is failed instead of recovered again.'),
        ),
    ]
