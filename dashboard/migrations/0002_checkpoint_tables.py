"""Create LangGraph's checkpoint tables with the saver's own setup(), in this database."""

from django.db import migrations


def create_tables(apps, schema_editor):
    """Run the saver's setup against the database being migrated."""
    from dashboard.runs.savers import setup_checkpoint_tables

    setup_checkpoint_tables(schema_editor.connection.settings_dict)


class Migration(migrations.Migration):
    atomic = False  # the savers manage their own transactions
    dependencies = [("dashboard", "0001_initial")]
    operations = [migrations.RunPython(create_tables, migrations.RunPython.noop)]
