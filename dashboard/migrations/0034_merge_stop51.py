"""Stop 51's migrations, once five branches beside each other after 0032, are one chain
(0033_outcome_stored, _fence_run_epoch, _budget, _fork_model_settings,
_ui_interrupt_answer_key): on SQLite, moving back through branches that each remake the
run table dropped a column another branch had added while its migration stayed applied.
This one is kept, empty, so the graph's leaf keeps its name."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("dashboard", "0033_ui_interrupt_answer_key")]
    operations: list[migrations.operations.base.Operation] = []
