from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("dashboard", "0033_fork_model_settings")]

    operations = [
        migrations.AddField(
            model_name="interrupt",
            name="answer_key",
            field=models.CharField(
                blank=True, max_length=64,
                help_text="The key its sender gave the answer (a page's form): the same answer "
                          "sent again with it is applied once and reported as recorded."),
        ),
    ]
