"""The audit log records who submitted, cancelled, restarted, marked known-good, asked for a
snapshot, created and revoked a token (drain and the device marks: tests/health)."""

from __future__ import annotations

import pytest

from npulab.audit import actions
from npulab.audit.models import AuditEntry
from npulab.snapshots.services import do_record_snapshot
from tests.conftest import make_operator, token_client

pytestmark = pytest.mark.django_db
SMOKE = {"kind": "smoke", "device_type": "cpu", "matmul_size": 64, "train_steps": 2}


def entries() -> list[tuple[str, str, str, str]]:
    return [
        (entry.actor_label, entry.action, entry.target_type, entry.target_id)
        for entry in AuditEntry.objects.order_by("id")
    ]


def test_a_runs_life_by_hand_is_in_the_log(api, owner, cpu_host) -> None:
    AuditEntry.objects.all().delete()  # the fixture's token
    run = api.post("/api/v1/runs/", SMOKE, format="json").json()
    assert api.post(f"/api/v1/runs/{run['id']}/cancel/").status_code == 200
    assert api.post(f"/api/v1/runs/{run['id']}/restart/").status_code == 200
    run_id = str(run["id"])
    assert entries() == [
        ("owner", actions.RUN_SUBMIT, "run", run_id),
        ("owner", actions.RUN_CANCEL, "run", run_id),
        ("owner", actions.RUN_RESTART, "run", run_id),
    ]
    submitted = AuditEntry.objects.get(action=actions.RUN_SUBMIT)
    assert submitted.user == owner
    assert submitted.data == {"device_type": "cpu", "devices": 1, "hosts": 1}


def test_a_refused_submission_leaves_no_entry(api) -> None:
    AuditEntry.objects.all().delete()
    assert api.post("/api/v1/runs/", {**SMOKE, "devices": 0}, format="json").status_code == 400
    assert entries() == []


def test_known_good_and_snapshot_requests_are_in_the_log(api, owner, cpu_host, document) -> None:
    make_operator(owner)
    AuditEntry.objects.all().delete()
    snapshot = do_record_snapshot(cpu_host, document()).snapshot
    url = f"/api/v1/snapshots/{snapshot.pk}/known-good/"
    api.post(url, {"note": "green for a week"}, format="json")
    api.delete(url)
    assert api.post("/api/v1/hosts/cpu-01/snapshot-request/").status_code == 202
    assert entries() == [
        ("owner", actions.SNAPSHOT_MARK_KNOWN_GOOD, "snapshot", str(snapshot.pk)),
        ("owner", actions.SNAPSHOT_UNMARK_KNOWN_GOOD, "snapshot", str(snapshot.pk)),
        ("owner", actions.HOST_REQUEST_SNAPSHOT, "host", str(cpu_host.pk)),
    ]
    assert AuditEntry.objects.get(action=actions.SNAPSHOT_MARK_KNOWN_GOOD).note == (
        "green for a week"
    )


def test_tokens_made_and_revoked_are_in_the_log_without_the_token(owner) -> None:
    api = token_client(owner)
    made = api.post("/api/v1/tokens/", {"name": "ci", "scopes": ["read"]}, format="json").json()
    api.post(f"/api/v1/tokens/{made['id']}/revoke/")
    created, revoked = AuditEntry.objects.filter(target_id=str(made["id"])).order_by("id")
    assert (created.action, created.actor_label, created.data["scopes"]) == (
        actions.TOKEN_CREATE,
        "owner",
        ["read"],
    )
    assert (revoked.action, revoked.actor_label) == (actions.TOKEN_REVOKE, "owner")
    assert created.target_label == f"{made['display']}… ci"
    everything = " ".join(str(vars(entry)) for entry in AuditEntry.objects.all())
    assert made["token"] not in everything
    # Revoking again changes nothing, and records nothing.
    api.post(f"/api/v1/tokens/{made['id']}/revoke/")
    assert AuditEntry.objects.filter(action=actions.TOKEN_REVOKE).count() == 1


def test_every_action_has_a_label() -> None:
    names = {value for name, value in vars(actions).items() if name.isupper() and name != "LABELS"}
    assert names == set(actions.LABELS)
