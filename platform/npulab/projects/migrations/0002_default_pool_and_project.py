"""The default pool and project, with every existing user as a member.

An existing site keeps working as it did: every host goes to the default pool
(hosts' migration), every run to the default project (runs' migration), and
every user may read and submit there. A stricter site then makes projects and
changes roles.
"""

from django.conf import settings
from django.db import migrations

POOL = "default"
PROJECT = "default"


def make_defaults(apps, schema_editor):
    Pool = apps.get_model("projects", "Pool")
    Project = apps.get_model("projects", "Project")
    Membership = apps.get_model("projects", "Membership")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    pool, _ = Pool.objects.get_or_create(
        name=POOL, defaults={"description": "Every host, unless an operator moves it."}
    )
    project, _ = Project.objects.get_or_create(
        slug=PROJECT,
        defaults={"name": "Default", "description": "Runs submitted without a project."},
    )
    project.pools.add(pool)
    have = set(Membership.objects.filter(project=project).values_list("user_id", flat=True))
    Membership.objects.bulk_create(
        Membership(project=project, user_id=pk, role="member")
        for pk in User.objects.exclude(pk__in=have).values_list("pk", flat=True)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("projects", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(make_defaults, migrations.RunPython.noop)]
