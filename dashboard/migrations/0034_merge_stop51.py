"""Joins the migrations that stop 51's branches added beside each other after 0032."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0033_budget"),
        ("dashboard", "0033_ui_interrupt_answer_key"),
        ("dashboard", "0033_fence_run_epoch"),
        ("dashboard", "0033_outcome_stored"),
        ("dashboard", "0033_fork_model_settings"),
    ]
    operations: list[migrations.operations.base.Operation] = []
