"""Issue 51: a run's outcome is decided once, when it stops, and stored (``Run.outcome``,
``Run.outcome_reason``; :mod:`dashboard.runs.outcome`). Finished runs are filled from what
they stored: a succeeded run whose output says its goal failed (its graph's
``failed_when``) is ``plan_failed``, a failed run ``failed`` with its error, a cancelled
run ``cancelled`` with who cancelled it (its closing event's payload); a failed plan's
thread, if the run is its latest, takes the status ``error``.
"""

from django.db import migrations, models
from django.db.models import Q

FINISHED = ("succeeded", "failed", "cancelled")


def fill_outcomes(apps, schema_editor):
    """Each finished run's outcome, as :func:`~dashboard.runs.outcome.outcome_decide` says
    it now (the rule the store applies from here on)."""
    from dashboard.runs.outcome import outcome_decide
    from planner.registry import all_graphs

    Run = apps.get_model("dashboard", "Run")
    RunEvent = apps.get_model("dashboard", "RunEvent")
    Thread = apps.get_model("dashboard", "Thread")
    failing = {spec.name: spec for spec in all_graphs() if spec.failed_when}
    # a goal met, in one statement (the runs of graphs whose output may say otherwise aside)
    maybe_failed = Q(pk__in=[])
    for name, spec in failing.items():
        maybe_failed |= Q(graph=name, **{f"output__{k}": v for k, v in spec.failed_when.items()})
    Run.objects.filter(state="succeeded", outcome__isnull=True).exclude(maybe_failed).update(
        outcome="succeeded", outcome_reason="")
    Run.objects.filter(state="failed", outcome__isnull=True).update(
        outcome="failed", outcome_reason=models.Case(
            models.When(error_message="", then=models.Value("the run failed")),
            default=models.F("error_message"), output_field=models.TextField()))
    for run in Run.objects.filter(state="succeeded", outcome__isnull=True).only(
            "id", "graph", "output", "conversation_id", "created_at").iterator():
        outcome, reason = outcome_decide(state="succeeded", spec=failing.get(run.graph),
                                         output=run.output)
        Run.objects.filter(id=run.id).update(outcome=outcome, outcome_reason=reason)
        latest = Run.objects.filter(conversation_id=run.conversation_id).order_by(
            "-created_at").values_list("id", flat=True).first()
        if outcome == "plan_failed" and run.conversation_id and latest == run.id:
            Thread.objects.filter(id=run.conversation_id, status="idle").update(status="error")
    for run in Run.objects.filter(state="cancelled", outcome__isnull=True).only("id").iterator():
        closing = (RunEvent.objects.filter(run_id=run.id, kind="run_cancelled")
                   .order_by("-seq").values_list("payload", flat=True).first())
        outcome, reason = outcome_decide(state="cancelled", spec=None,
                                         closing=closing if isinstance(closing, dict) else None)
        Run.objects.filter(id=run.id).update(outcome=outcome, outcome_reason=reason)


class Migration(migrations.Migration):

    dependencies = [
        ("dashboard", "0032_langgraph_run_rollback"),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='outcome',
            field=models.CharField(blank=True, choices=[('succeeded', 'Succeeded'), ('plan_failed', 'Plan failed'), ('failed', 'Failed'), ('cancelled', 'Cancelled'), ('budget_exceeded', 'Budget exceeded')], default=None, max_length=16, null=True),
        ),
        migrations.AddField(
            model_name='run',
            name='outcome_reason',
            field=models.TextField(blank=True, default='', help_text='Why it ended so ("" for a goal met).'),
        ),
        migrations.RunPython(fill_outcomes, migrations.RunPython.noop, elidable=True),
        migrations.AddConstraint(
            model_name='run',
            constraint=models.CheckConstraint(condition=models.Q(('outcome__isnull', True), models.Q(('outcome', 'succeeded'), ('state', 'succeeded')), models.Q(('outcome', 'plan_failed'), ('state', 'succeeded')), models.Q(('outcome', 'failed'), ('state', 'failed')), models.Q(('outcome', 'cancelled'), ('state', 'cancelled')), models.Q(('outcome', 'budget_exceeded'), ('state', 'cancelled')), _connector='OR'), name='run_outcome_of_its_state'),
        ),
    ]
