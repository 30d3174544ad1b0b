"""Creates the "operators" group and gives it the health.operate_hosts permission
(npulab.health.roles: drain, undrain, clear a device); reversed, it deletes the group."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP = "operators"
CODENAME = "operate_hosts"


def add_group(apps, schema_editor):
    # Permissions are normally made after all migrations; this one is needed now.
    # A historical app config has no models module, which create_permissions skips.
    config = apps.get_app_config("health")
    config.models_module = True
    create_permissions(config, verbosity=0, apps=apps)
    config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name=GROUP)
    permission = Permission.objects.get(content_type__app_label="health", codename=CODENAME)
    group.permissions.add(permission)


def remove_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=GROUP).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("health", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(add_group, remove_group)]
