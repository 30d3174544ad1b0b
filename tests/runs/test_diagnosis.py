"""A failed run's diagnosis: from its event into the run API and page, filtered by category."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from django.utils import timezone

from npulab.runs.events import store_events
from npulab.runs.models import Run
from tests.factories import RunFactory
from workers.contract.kinds import validate
from workers.diagnosis import diagnose_paths

pytestmark = pytest.mark.django_db
CORPUS = "tests/fixtures/diagnosis/corpus/"


def _failed_run(case: str, env: dict | None = None) -> Run:
    found = diagnose_paths([CORPUS + case + ".log"], tables={})
    diagnosis = {**found["root_cause"], "evidence": found["evidence"], "findings": []}
    run = RunFactory(
        spec=validate({"kind": "smoke", "device_type": "cpu", "env": env or {}}),
        status=Run.Status.FAILED,
    )
    store_events(
        run,
        [{"type": "diagnosis", "time": 1.0, "diagnosis": diagnosis, "findings": []}],
        timezone.now(),
    )
    run.refresh_from_db()
    return run


def test_the_diagnosis_event_is_the_runs_diagnosis_in_the_api(client, django_user_model):
    run = _failed_run("lost-heartbeat-el0001")
    assert run.diagnosis_category == "hardware-fault"
    client.force_login(run.submitted_by)
    body = client.get(f"/api/v1/runs/{run.pk}/").json()
    diagnosis = body["diagnosis"]
    assert diagnosis["category"] == "hardware-fault"
    assert diagnosis["blame"] == "host-hardware"
    assert diagnosis["codes"][0] == "507010"
    assert set(diagnosis["evidence"][0]) == {"file", "line_no", "text"}
    listed = client.get("/api/v1/runs/", {"category": "hardware-fault"}).json()["results"]
    assert [item["id"] for item in listed] == [run.pk]
    assert client.get("/api/v1/runs/", {"category": "oom"}).json()["results"] == []
    assert client.get("/api/v1/runs/", {"category": "nonsense"}).status_code == 400


def test_the_run_page_shows_the_diagnosis_first(client):
    run = _failed_run("oom-new-format-sglang")
    client.force_login(run.submitted_by)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="diagnosis"' in html
    assert html.index('id="diagnosis"') < html.index("Metrics")
    assert "NPU out of memory" in html


def test_a_secret_in_the_evidence_is_redacted():
    run = RunFactory(
        spec=validate({"kind": "smoke", "device_type": "cpu", "env": {"API_KEY": "k3y-and-more"}}),
        status=Run.Status.FAILED,
    )
    diagnosis = {
        "category": "oom",
        "codes": [],
        "line": "NPU out of memory k3y-and-more",
        "fix": "",
        "blame": "user-code",
        "rule": "npu-oom",
        "evidence": [{"file": "stderr", "line_no": 1, "text": "k3y-and-more"}],
    }
    store_events(
        run,
        [{"type": "diagnosis", "time": 1.0, "diagnosis": diagnosis, "findings": []}],
        timezone.now(),
    )
    run.refresh_from_db()
    assert "k3y-and-more" not in str(run.diagnosis)


def _members(content: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(content), mode="r:gz") as archive:
        return {info.name: archive.extractfile(info).read() for info in archive if info.isfile()}


def test_the_support_bundle_holds_spec_diagnosis_and_log_with_secrets_redacted(client):
    run = _failed_run("lost-heartbeat-el0001", env={"API_KEY": "k3y-and-more"})
    store_events(
        run,
        [{"type": "log", "time": 2.0, "stream": "stderr", "line": "using k3y-and-more"}],
        timezone.now(),
    )
    client.force_login(run.submitted_by)
    response = client.get(f"/api/v1/runs/{run.pk}/bundle/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/gzip"
    members = _members(b"".join(response.streaming_content))
    prefix = f"npulab-run-{run.pk}/"
    assert json.loads(members[prefix + "diagnosis.json"])["diagnosis"]["category"] == (
        "hardware-fault"
    )
    assert json.loads(members[prefix + "spec.json"])["env"] == {"API_KEY": "<redacted>"}
    assert b"using <redacted>" in members[prefix + "logs/run.log"]
    assert not any(b"k3y-and-more" in data for data in members.values())
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert f'href="/runs/{run.pk}/bundle/"' in page
    assert client.get(f"/runs/{run.pk}/bundle/").status_code == 200


def test_the_run_list_page_filters_by_diagnosis_category(client):
    oom = _failed_run("oom-1eb")
    hardware = _failed_run("lost-heartbeat-el0001")
    client.force_login(oom.submitted_by)
    hardware.submitted_by = oom.submitted_by
    hardware.project = oom.project
    hardware.save()
    html = client.get("/runs/", {"category": "oom"}).content.decode()
    assert f'data-run="{oom.pk}"' in html
    assert f'data-run="{hardware.pk}"' not in html
    assert 'data-failure="oom"' in html


def test_the_evidence_lines_are_marked_in_the_log(client):
    run = _failed_run("oom-1eb")
    run.diagnosis["evidence"][0]["file"] = "stderr"
    run.started_at = timezone.now()
    run.save()
    store_events(
        run,
        [
            {"type": "log", "time": 2.0, "stream": "stdout", "line": "step 1"},
            {
                "type": "log",
                "time": 3.0,
                "stream": "stderr",
                "line": "NPU out of memory. Tried to allocate more than 1EB memory",
            },
        ],
        timezone.now(),
    )
    client.force_login(run.submitted_by)
    html = client.get(f"/runs/{run.pk}/log/").content.decode()
    assert html.count('title="evidence of the diagnosis"') == 1
    assert 'stderr evidence" id="L2"' in html
