"""RunEvent.at: when the thing an event records happened, beside when its row was written."""

from __future__ import annotations

from typing import Any

import django.utils.timezone
from django.db import migrations, models


def written_is_when(apps: Any, schema_editor: Any) -> None:
    """Rows written before ``at`` existed: the write time is the best time known."""
    RunEvent = apps.get_model("dashboard", "RunEvent")
    RunEvent.objects.update(at=models.F("created_at"))


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0022_merge_taken_up_waiting_label'),
    ]

    operations = [
        migrations.AddField(
            model_name='runevent',
            name='at',
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.RunPython(written_is_when, migrations.RunPython.noop),
    ]
