"""The hot paths' plain SQL gives the instances and writes the values the ORM would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import ProgrammingError, connection
from django.forms.models import model_to_dict
from django.utils import timezone

from npulab.core.sql import fetch_instance, server_cursor, update_fields
from npulab.hosts.models import Host
from npulab.runs.models import Run
from tests.conftest import register
from tests.factories import RunFactory

pytestmark = pytest.mark.django_db

BY_ID = "SELECT {columns} FROM {table} WHERE id = %s"


def every_field(instance: object) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in Run._meta.concrete_fields}


def test_a_fetched_run_equals_the_orms_in_every_field() -> None:
    run = RunFactory(
        tags=["nightly", "ü"],
        result={"status": "succeeded", "summary": {"loss": 0.5, "nested": [1, None]}},
        last_heartbeat=datetime(2026, 12, 3, 9, 30, 1, 123456, tzinfo=UTC),
        events_offset=2**40,
    )
    fetched = fetch_instance(Run, BY_ID, [run.pk])
    stored = Run.objects.get(pk=run.pk)
    assert every_field(fetched) == every_field(stored)
    assert fetched.last_heartbeat.tzinfo is not None
    assert fetched == stored
    assert not fetched._state.adding
    assert fetched.get_deferred_fields() == set()


def test_a_fetched_host_equals_the_orms_and_saves_like_it(cpu_host: Host) -> None:
    register(cpu_host, devices=2, labels=["a", "b"])
    fetched = fetch_instance(Host, BY_ID, [cpu_host.pk])
    assert model_to_dict(fetched) == model_to_dict(Host.objects.get(pk=cpu_host.pk))
    fetched.labels = ["c"]
    fetched.save()
    assert Host.objects.get(pk=cpu_host.pk).labels == ["c"]


def test_no_row_is_none() -> None:
    assert fetch_instance(Host, BY_ID, [10**9]) is None


def test_the_template_may_lock_the_row(cpu_host: Host) -> None:
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    assert fetch_instance(Host, BY_ID + lock, [cpu_host.pk]).name == cpu_host.name


def test_update_fields_writes_what_save_would_and_nothing_else() -> None:
    run = RunFactory(name="kept")
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Run.objects.filter(pk=run.pk).update(updated=an_hour_ago)
    run.updated = an_hour_ago
    run.result = {"status": "failed", "reason": "x" * 3, "summary": {"nan": None}}
    run.events_offset = 12345
    run.last_heartbeat = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
    run.name = "not written"
    update_fields(run, ["result", "events_offset", "last_heartbeat", "updated"])
    stored = Run.objects.get(pk=run.pk)
    assert (stored.result, stored.events_offset, stored.last_heartbeat) == (
        run.result,
        12345,
        datetime(2026, 12, 3, 10, 0, tzinfo=UTC),
    )
    assert stored.name == "kept"
    # auto_now: stamped on the instance and in the row, as save(update_fields=...) does.
    assert stored.updated == run.updated > an_hour_ago


@pytest.mark.skipif(connection.vendor != "postgresql", reason="psycopg's own cursor")
def test_the_server_cursors_errors_are_djangos_and_mark_the_connection() -> None:
    with pytest.raises(ProgrammingError), server_cursor() as cursor:
        cursor.execute("SELECT no_such_column FROM no_such_table")
    assert connection.errors_occurred
