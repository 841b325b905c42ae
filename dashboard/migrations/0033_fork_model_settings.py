"""A run's model, parameters and prompts chosen instead of its graph's (a fork's)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("dashboard", "0033_budget")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="model_settings",
            field=models.JSONField(
                blank=True, default=dict,
                help_text="The model, its parameters and the prompts this run uses instead "
                          "of its graph's (a fork's choice): {'model': 'openai:gpt-4o-mini', "
                          "'temperature': 0.2, 'max_tokens': 512, 'prompts': {'plan': '…'}}; "
                          "{}: its graph's own."),
        ),
    ]
