"""Known-good marks (the upgrade review's go / no-go rests on them) and snapshot requests act
on the shared machines, not on a project: they need the operator role."""

from __future__ import annotations

import pytest
from django.test import Client

from npulab.snapshots.models import Snapshot
from npulab.snapshots.services import do_record_snapshot
from tests.conftest import make_operator, token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def snapshot(cpu_host, document) -> Snapshot:
    return do_record_snapshot(cpu_host, document()).snapshot


def test_a_user_without_the_role_may_not_mark_known_good(owner, snapshot) -> None:
    url = f"/api/v1/snapshots/{snapshot.pk}/known-good/"
    api = token_client(owner)
    for reply in (api.post(url, {"note": "green"}, format="json"), api.delete(url)):
        assert reply.status_code == 403
        assert reply.json()["code"] == "permission_denied"
        assert "operator role" in reply.json()["detail"]
    browser = Client()
    browser.force_login(owner)
    assert browser.post(f"/snapshots/{snapshot.pk}/known-good/", {"note": "x"}).status_code == 403
    page = browser.get(f"/snapshots/{snapshot.pk}/").content.decode()
    assert "Mark known good" not in page
    assert "needs the operator role" in page
    snapshot.refresh_from_db()
    assert snapshot.known_good_at is None


def test_an_operator_marks_known_good(owner, snapshot) -> None:
    make_operator(owner)
    url = f"/api/v1/snapshots/{snapshot.pk}/known-good/"
    assert token_client(owner).post(url, {"note": "green"}, format="json").status_code == 200
    snapshot.refresh_from_db()
    assert snapshot.known_good_at is not None


def test_asking_a_host_for_a_snapshot_needs_the_operator_role(owner, cpu_host) -> None:
    url = "/api/v1/hosts/cpu-01/snapshot-request/"
    assert token_client(owner).post(url).status_code == 403
    browser = Client()
    browser.force_login(owner)
    assert browser.post("/hosts/cpu-01/snapshot-request/").status_code == 403
    assert "Collect snapshot now" not in browser.get("/hosts/cpu-01/").content.decode()
    cpu_host.refresh_from_db()
    assert cpu_host.snapshot_requested is False
    make_operator(owner)
    assert token_client(owner).post(url).status_code == 202
