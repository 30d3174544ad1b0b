# Tokens get scopes, an expiry and a revocation time.
#
# Tokens issued before this migration keep working as they did for what a
# pipeline does with them: they get the scopes read and submit (the default of
# new tokens too), never expire and are not revoked. The operator actions
# (known-good marks, snapshot requests) now need a token with the admin scope.

from django.db import migrations, models

import npulab.accounts.models


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0001_initial"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="apitoken",
            options={"ordering": ["-created", "-id"]},
        ),
        migrations.AddField(
            model_name="apitoken",
            name="scopes",
            field=models.JSONField(
                default=npulab.accounts.models.default_scopes,
                help_text="Any of read, submit and admin.",
            ),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="expires",
            field=models.DateTimeField(blank=True, help_text="Empty: never.", null=True),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="revoked",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
