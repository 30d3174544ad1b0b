from django.db import migrations, models


def count_old_failures_as_faults(apps, schema_editor):
    # Before, every restartable failure counted towards avoiding a host; runs queued
    # across the upgrade keep avoiding the hosts they were avoiding.
    Run = apps.get_model("runs", "Run")
    for run in Run.objects.exclude(failed_hosts={}).only("pk", "failed_hosts").iterator():
        Run.objects.filter(pk=run.pk).update(host_faults=run.failed_hosts)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0010_attempt_current_step"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="host_faults",
            field=models.JSONField(
                blank=True,
                db_default=models.Value({}, output_field=models.JSONField()),
                default=dict,
                help_text="Host name -> attempts that failed there for a cause that blames the host.",
            ),
        ),
        migrations.RunPython(count_old_failures_as_faults, migrations.RunPython.noop),
    ]
