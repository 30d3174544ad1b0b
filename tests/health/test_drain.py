"""Draining over the API: operators only, a note, the audit log, and what the scheduler does."""

from __future__ import annotations

import pytest

from npulab.audit.models import AuditEntry
from npulab.health.models import HealthChange, HostHealth
from npulab.health.services import mark_device_bad
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_claim_run, do_finish_run, do_ingest_events, do_submit_run
from tests.conftest import token_client
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
SMOKE = {"kind": "smoke", "device_type": "cpu"}


def drain(client, host: str = "cpu-01", note: str = "replacing a fan"):
    return client.post(f"/api/v1/hosts/{host}/drain/", {"note": note}, format="json")


def test_an_operator_drains_and_undrains_with_a_note_and_it_is_audited(
    operator, operator_api, cpu_host
) -> None:
    reply = drain(operator_api)
    assert reply.status_code == 200, reply.json()
    body = reply.json()
    assert (body["state"], body["drained"], body["drain_note"], body["drained_by"]) == (
        "drained",
        True,
        "replacing a fan",
        "oper",
    )
    assert operator_api.get("/api/v1/hosts/cpu-01/health/").json()["state"] == "drained"
    reply = operator_api.post("/api/v1/hosts/cpu-01/undrain/", {"note": "fan done"}, format="json")
    assert reply.status_code == 200
    assert (reply.json()["state"], reply.json()["drained"]) == ("healthy", False)
    # The health actions (the test's own token is in the log too).
    entries = AuditEntry.objects.filter(action__startswith="health.").order_by("id")
    assert [(e.actor_label, e.action, e.target_label, e.note) for e in entries] == [
        ("oper", "health.drain", "cpu-01", "replacing a fan"),
        ("oper", "health.undrain", "cpu-01", "fan done"),
    ]
    assert entries[0].user == operator
    changes = HealthChange.objects.filter(host=cpu_host).order_by("id")
    assert [(c.previous, c.state, c.by, c.note) for c in changes] == [
        ("healthy", "drained", operator, "replacing a fan"),
        ("drained", "healthy", operator, "fan done"),
    ]


def test_a_plain_user_may_not_drain(api, cpu_host) -> None:
    reply = drain(api)
    assert reply.status_code == 403
    assert reply.json()["code"] == "permission_denied"
    assert "operator role" in reply.json()["detail"]
    assert not HostHealth.objects.filter(host=cpu_host, drained=True).exists()
    assert not AuditEntry.objects.filter(action__startswith="health.").exists()


def test_a_superuser_is_an_operator(cpu_host) -> None:
    admin = UserFactory(username="root", is_superuser=True)
    assert drain(token_client(admin)).status_code == 200


def test_the_note_is_required(operator_api, cpu_host) -> None:
    reply = operator_api.post("/api/v1/hosts/cpu-01/drain/", {}, format="json")
    assert reply.status_code == 400
    assert (reply.json()["code"], "note" in reply.json()) == ("invalid", True)
    assert drain(operator_api, note="  ").status_code == 400
    assert not HostHealth.objects.filter(drained=True).exists()


def test_a_token_needs_the_admin_scope(operator, cpu_host) -> None:
    reply = drain(token_client(operator, scopes=["read", "submit"]))
    assert (reply.status_code, reply.json()["code"]) == (403, "insufficient_scope")


def test_draining_twice_is_a_conflict_that_keeps_the_first_note(operator_api, cpu_host) -> None:
    drain(operator_api)
    reply = drain(operator_api, note="another reason")
    assert reply.status_code == 409
    assert "already drained by oper: replacing a fan" in reply.json()["detail"]
    assert HostHealth.objects.get(host=cpu_host).drain_note == "replacing a fan"
    assert operator_api.post("/api/v1/hosts/nope/drain/", {"note": "x"}).status_code == 404


def test_undraining_a_host_that_is_not_drained_is_a_conflict(operator_api, cpu_host) -> None:
    assert operator_api.post("/api/v1/hosts/cpu-01/undrain/").status_code == 409


def test_a_drained_host_finishes_its_run_and_a_new_one_waits_with_the_reason(
    owner, operator_api, cpu_host, django_capture_on_commit_callbacks, sent_tasks
) -> None:
    running = do_submit_run(owner, SMOKE)
    place_queued_runs()
    running.refresh_from_db()
    do_claim_run(cpu_host, running.pk, running.attempt)
    assert drain(operator_api).status_code == 200

    # Accepted, though its only host is drained: a drained host comes back.
    waiting = do_submit_run(owner, SMOKE)
    place_queued_runs()
    waiting.refresh_from_db()
    assert waiting.status == "queued"
    assert waiting.queue_reason == "no online cpu host (cpu-01 is drained: replacing a fan)"
    assert waiting.queue_expires_at is None

    # The running one goes on and ends as usual; its freed device still takes nothing new.
    result = {"type": "result", "time": 1.0, "status": "succeeded", "reason": "", "summary": {}}
    do_ingest_events(cpu_host, running.pk, 1, 0, 10, [result])
    assert do_finish_run(cpu_host, running.pk, 1, {"exit_code": 0}).status == "succeeded"
    place_queued_runs()
    waiting.refresh_from_db()
    assert waiting.status == "queued"

    # Undrained: placement is asked for at once and the run goes.
    with django_capture_on_commit_callbacks(execute=True):
        operator_api.post("/api/v1/hosts/cpu-01/undrain/")
    assert {"task": "runs.place_runs", "args": [], "queue": "control"} in sent_tasks
    place_queued_runs()
    waiting.refresh_from_db()
    assert (waiting.status, waiting.host) == ("dispatched", cpu_host)


def test_a_run_that_names_a_drained_host_says_so(owner, operator_api, cpu_host) -> None:
    drain(operator_api)
    run = do_submit_run(owner, {**SMOKE, "host": "cpu-01"})
    place_queued_runs()
    run.refresh_from_db()
    assert run.queue_reason == "host 'cpu-01' is drained: replacing a fan"
    assert Run.objects.filter(status="dispatched").count() == 0


def test_an_operator_clears_a_bad_device_over_the_api(operator_api, api, npu_host) -> None:
    host = npu_host("npu-01", devices=2)
    mark_device_bad(host, 1, "stability run failed", run=7)
    url = "/api/v1/hosts/npu-01/devices/1/clear/"
    assert api.post(url, {"note": "x"}, format="json").status_code == 403
    reply = operator_api.post(url, {"note": "card reseated"}, format="json")
    assert reply.status_code == 200
    assert (reply.json()["state"], reply.json()["reasons"]) == ("healthy", [])
    assert HostHealth.objects.get(host=host).state == "healthy"
    assert operator_api.post("/api/v1/hosts/npu-01/devices/5/clear/").status_code == 404
    actions = list(
        AuditEntry.objects.filter(action__startswith="health.")
        .order_by("id")
        .values_list("action", "actor_label")
    )
    assert actions == [("health.mark_device_bad", "npulab"), ("health.clear_device", "oper")]


def test_the_audit_log_is_for_operators(operator_api, api, operator, cpu_host) -> None:
    drain(operator_api)
    assert api.get("/api/v1/audit/").status_code == 403
    reply = operator_api.get("/api/v1/audit/?action=health.drain")
    assert reply.status_code == 200
    (entry,) = reply.json()["results"]
    assert (entry["actor"], entry["target_label"], entry["note"]) == (
        "oper",
        "cpu-01",
        "replacing a fan",
    )
