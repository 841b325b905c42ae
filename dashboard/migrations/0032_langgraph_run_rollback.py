"""Issue 41: a LangGraph run that is not its ``Run``'s first can be rolled back alone.
Each keeps where its ``Run`` waited when it went on (``went_on_from``: what a rollback
returns the ``Run`` to), and a rollback request is a column written with the cancel
(``rollback_requested_at``), so a crash between the cancel and the run's stop forgets
nothing. A LangGraph run made before: paused if its first event is the operator's
``run_continued`` (a continue writes it at its request), interrupted otherwise (a resume).
"""

from django.db import migrations, models


def where_each_went_on_from(apps, schema_editor):
    """Every LangGraph run but a ``Run``'s first: a continue or a resume, by its log."""
    LangGraphRun = apps.get_model("dashboard", "LangGraphRun")
    RunEvent = apps.get_model("dashboard", "RunEvent")
    later = LangGraphRun.objects.exclude(id=models.F("run_id"))
    continued = RunEvent.objects.filter(run_id=models.OuterRef("run_id"),
                                        seq=models.OuterRef("first_seq"),
                                        kind="run_continued")
    later.filter(models.Exists(continued)).update(went_on_from="paused")
    later.filter(went_on_from="").update(went_on_from="interrupted")


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0031_run_stream_tokens'),
    ]

    operations = [
        migrations.AddField(
            model_name='langgraphrun',
            name='went_on_from',
            field=models.CharField(blank=True, choices=[('interrupted', 'Waiting for you'), ('paused', 'Paused')], help_text='Where its Run waited when it went on: interrupted (a resume: answered) or paused (a continue past a breakpoint); blank for the one that made it.', max_length=16),
        ),
        migrations.AddField(
            model_name='langgraphrun',
            name='rollback_requested_at',
            field=models.DateTimeField(blank=True, help_text='When a client asked to roll it back (cancel with action=rollback): done once its Run stopped, by whoever sees it stop.', null=True),
        ),
        migrations.RunPython(where_each_went_on_from, migrations.RunPython.noop,
                             elidable=True),
        migrations.AddIndex(
            model_name='langgraphrun',
            index=models.Index(condition=models.Q(('rollback_requested_at__isnull', False)), fields=['rollback_requested_at'], name='langgraphrun_to_roll_back'),
        ),
        migrations.AddConstraint(
            model_name='langgraphrun',
            constraint=models.CheckConstraint(condition=models.Q(('went_on_from__in', ['', 'interrupted', 'paused'])), name='langgraphrun_went_on_from_valid'),
        ),
    ]
