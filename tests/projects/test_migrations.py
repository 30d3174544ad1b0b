"""An existing site migrates into projects without losing anyone's access: every user in the
default project as a member, every host in the default pool, every run in the default project."""

from __future__ import annotations

import pytest
from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.runs.test_migrations import restored  # noqa: F401 - the fixture

BEFORE = [
    ("runs", "0011_run_host_faults"),
    ("hosts", "0002_host_snapshot_requested"),
    ("projects", None),
]


def migrate(*targets: tuple[str, str | None]) -> Apps:
    """Migrate to ``targets`` (None: an app unapplied); the models as they were there."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(list(targets))
    applied = [target for target in targets if target[1] is not None]
    return MigrationExecutor(connection).loader.project_state(applied).apps


@pytest.mark.django_db(transaction=True)
def test_users_hosts_and_runs_of_before_land_in_the_defaults(restored) -> None:  # noqa: F811
    old = migrate(*BEFORE)
    user = old.get_model("auth", "User").objects.create(username="before")
    host = old.get_model("hosts", "Host").objects.create(name="old-01")
    run = old.get_model("runs", "Run").objects.create(
        kind="smoke", spec={}, device_type="cpu", submitted_by_id=user.pk, host_id=host.pk
    )

    new = migrate(*MigrationExecutor(connection).loader.graph.leaf_nodes())

    project = new.get_model("projects", "Project").objects.get(slug="default")
    assert [pool.name for pool in project.pools.all()] == ["default"]
    assert new.get_model("runs", "Run").objects.get(pk=run.pk).project_id == project.pk
    assert new.get_model("hosts", "Host").objects.get(pk=host.pk).pool.name == "default"
    membership = new.get_model("projects", "Membership").objects.get(user_id=user.pk)
    assert (membership.project_id, membership.role) == (project.pk, "member")
