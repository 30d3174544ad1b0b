# POST /api/v1/runs/ with an Idempotency-Key: the key and a digest of the
# submitted document, unique per submitter where a key was given. Existing
# runs have no key.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0007_checkpoint_artifact"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="idempotency_key",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.AddField(
            model_name="run",
            name="idempotency_digest",
            field=models.CharField(
                blank=True,
                db_default="",
                default="",
                help_text="SHA-256 of the submitted document.",
                max_length=64,
            ),
        ),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.UniqueConstraint(
                condition=models.Q(("idempotency_key", ""), _negated=True),
                fields=("submitted_by", "idempotency_key"),
                name="run_idempotency_key_unique",
            ),
        ),
    ]
