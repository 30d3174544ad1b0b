"""A run's logs and its admin page show no secret of its env: short ones, and those in URLs."""

from __future__ import annotations

import pytest
from django.utils import timezone

from npulab.runs.events import store_events
from npulab.runs.models import RunEvent
from tests.factories import RunFactory, UserFactory
from workers.contract.kinds import validate

pytestmark = pytest.mark.django_db
ENV = {"HCCL_PASSWORD": "pw", "API_KEY": "k3y-and-more", "DB_URL": "postgres://app:dbpw@db/x"}


def logged(lines: list[str]) -> list[str]:
    run = RunFactory(spec=validate({"kind": "smoke", "device_type": "cpu", "env": ENV}))
    events = [{"type": "log", "time": 1.0, "stream": "stdout", "line": line} for line in lines]
    store_events(run, events, timezone.now())
    return [event.data["line"] for event in RunEvent.objects.filter(run=run).order_by("id")]


def test_short_secrets_are_redacted_where_they_stand_alone() -> None:
    assert logged(["password=pw;", "pwd is /root", "pw", "key k3y-and-more!"]) == [
        "password=<redacted>;",
        "pwd is /root",
        "<redacted>",
        "key <redacted>!",
    ]


def test_url_credentials_in_a_log_line_are_redacted_whatever_the_variable() -> None:
    assert logged(["connecting to postgres://app:dbpw@db/x", "mirror https://u:tok@m.org/"]) == [
        "connecting to postgres://app:<redacted>@db/x",
        "mirror https://u:<redacted>@m.org/",
    ]


def test_the_admin_run_page_shows_the_spec_as_the_api_does(client) -> None:
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    client.force_login(admin)
    run = RunFactory(spec=validate({"kind": "smoke", "device_type": "cpu", "env": ENV}))
    html = client.get(f"/admin/runs/run/{run.pk}/change/").content.decode()
    assert "k3y-and-more" not in html
    assert "dbpw" not in html
    assert "postgres://app:&lt;redacted&gt;@db/x" in html
