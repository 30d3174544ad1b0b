import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("runs", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="EchoWord",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False)),
                ("index", models.PositiveIntegerField()),
                ("word", models.CharField(max_length=200)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="echo_words",
                        to="runs.run",
                    ),
                ),
            ],
            options={"ordering": ["run", "index"]},
        ),
    ]
