"""Bad input is a 400 naming the field, or a 404 for an impossible id: never a 500.

On both databases: SQLite raises OverflowError for integers beyond 64 bits,
PostgreSQL refuses NUL and lone surrogates in text and jsonb.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import Resolver404, resolve

from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_claim_run, do_submit_run
from workers.contract.events import NDJSON

pytestmark = pytest.mark.django_db
BIG = 10**30
AGENT = "/api/v1/agent"
SMOKE = {"kind": "smoke", "device_type": "cpu"}
TRAINING = {"kind": "training", "device_type": "cpu", "entry": "builtin:cnn"}


def claimed(owner: Any, host: Any) -> Run:
    run = do_submit_run(owner, SMOKE)
    place_queued_runs()
    run.refresh_from_db()
    return do_claim_run(host, run.pk, run.attempt)


@pytest.mark.parametrize(
    "path",
    [
        f"/api/v1/runs/{BIG}/",
        f"/api/v1/runs/{2**63}/",
        f"/api/v1/runs/{BIG}/events/",
        f"/api/v1/runs/{BIG}/checkpoints/5/download/",
        f"/api/v1/runs/1/checkpoints/{BIG}/download/",
        f"/api/v1/runs/{BIG}/artifacts/",
        f"/api/v1/runs/{BIG}/artifacts/{BIG}/download/",
        f"/api/v1/runs/{BIG}/coverage/summary/",
        f"/api/v1/snapshots/{BIG}/",
        f"/api/v1/tokens/{BIG}/",
    ],
)
def test_api_ids_beyond_64_bits_are_not_found(api, path: str) -> None:
    response = api.get(path)
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_the_largest_id_is_still_an_id(api) -> None:
    assert api.get(f"/api/v1/runs/{2**63 - 1}/").json()["code"] == "not_found"


@pytest.mark.parametrize("action", ["claim", "events", "finish", "uploads"])
def test_agent_ids_beyond_64_bits_are_not_found(host_api, action: str) -> None:
    response = host_api.post(f"{AGENT}/runs/{BIG}/{action}/", {"attempt": 1}, format="json")
    assert response.status_code == 404


def test_agent_checkpoint_steps_beyond_64_bits_are_not_found(host_api) -> None:
    assert host_api.get(f"{AGENT}/runs/1/checkpoints/{BIG}/").status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        f"/runs/{BIG}/",
        f"/runs/{BIG}/log/",
        f"/runs/{BIG}/coverage/",
        f"/snapshots/{BIG}/",
        "/hosts/a%00b/",
        "/hosts/a%00b/history/",
    ],
)
def test_pages_for_impossible_ids_and_names_are_not_found(client, owner, path: str) -> None:
    client.force_login(owner)
    assert client.get(path).status_code == 404


@pytest.mark.parametrize(
    "path", ["/api/v1/hosts/a%00b/", "/api/v1/hosts/a%00b/history/", "/api/v1/kinds/a%00b/"]
)
def test_api_names_with_nul_are_not_found(api, path: str) -> None:
    assert api.get(path).status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"attempt": BIG, "start": 0, "end": 0, "events": []}, "attempt"),
        ({"attempt": 1, "start": 0, "end": BIG, "events": []}, "end"),
        ({"attempt": 1, "start": BIG, "end": BIG, "events": []}, "start"),
    ],
)
def test_events_batch_integers_beyond_64_bits(owner, cpu_host, host_api, body, field) -> None:
    run = claimed(owner, cpu_host)
    response = host_api.post(f"{AGENT}/runs/{run.pk}/events/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()


def test_heartbeat_running_beyond_64_bits(host_api) -> None:
    response = host_api.post(f"{AGENT}/heartbeat/", {"running": [BIG]}, format="json")
    assert response.status_code == 400
    assert "running" in response.json()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"attempt": 1, "exit_code": BIG}, "exit_code"),
        ({"attempt": BIG, "exit_code": 0}, "attempt"),
        ({"attempt": 1, "exit_code": 0, "exited_at": 1e308}, "exited_at"),
        ({"attempt": 1, "exit_code": 0, "exited_at": -1e308}, "exited_at"),
    ],
)
def test_finish_out_of_range(owner, cpu_host, host_api, body, field) -> None:
    run = claimed(owner, cpu_host)
    response = host_api.post(f"{AGENT}/runs/{run.pk}/finish/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()


@pytest.mark.parametrize(
    "path", ["/api/v1/runs/", f"{AGENT}/heartbeat/", f"{AGENT}/register/", f"{AGENT}/snapshots/"]
)
def test_json_nested_deep_is_a_bad_request(api, host_api, path: str) -> None:
    client = host_api if path.startswith(AGENT) else api
    deep = "[" * 100_000 + "]" * 100_000
    response = client.post(path, deep, content_type="application/json")
    assert response.status_code == 400


@pytest.mark.parametrize("form", ["json", "lines"])
def test_an_events_body_over_the_request_limit_is_refused_unread(
    owner, cpu_host, host_api, settings, form: str
) -> None:
    # Django checks the limit on request.body: a parser that reads the stream itself (the
    # lines form's did) takes any size.
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    run = claimed(owner, cpu_host)
    line = json.dumps({"type": "log", "time": 1.0, "stream": "stdout", "message": "x" * 5000})
    if form == "json":
        body = json.dumps({"attempt": 1, "start": 0, "end": 5100, "events": [json.loads(line)]})
        url, content_type = f"{AGENT}/runs/{run.pk}/events/", "application/json"
    else:
        body = line + "\n"
        url = f"{AGENT}/runs/{run.pk}/events/?attempt=1&start=0&end={len(body)}"
        content_type = NDJSON
    response = host_api.generic("POST", url, body, content_type=content_type)
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert "NPULAB_MAX_REQUEST_BYTES" in response.json()["detail"]
    run.refresh_from_db()
    assert run.events_offset == 0
    assert not run.events.exists()


def test_lone_surrogates_in_json_are_a_bad_request(api) -> None:
    body = '{"kind": "smoke", "device_type": "cpu", "name": "a\\ud800b"}'
    response = api.post("/api/v1/runs/", body, content_type="application/json")
    assert response.status_code == 400


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"name": "a\x00b"}, "name"),
        ({"tags": ["a\x00b"]}, "tags"),
        ({"env": {"A": "x\x00y"}}, "env"),
        ({"python": "/usr/bin/py\x00thon"}, "python"),
        ({"entry": "tra\x00in.py"}, "entry"),
        ({"args": ["--x\x00"]}, "args"),
        ({"workdir": "a\x00"}, "workdir"),
    ],
)
def test_nul_in_submitted_text_names_the_field(api, cpu_host, extra, field) -> None:
    response = api.post("/api/v1/runs/", {**TRAINING, **extra}, format="json")
    assert response.status_code == 400
    assert field in response.json()


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"env": {"A": "x" * 10_000_000}}, "env"),
        ({"env": {f"V{i}": "1" for i in range(1000)}}, "env"),
        ({"args": ["a"] * 100_000}, "args"),
        ({"args": ["a" * 70_000]}, "args"),
        ({"python": "../../bin/python"}, "python"),
        ({"python": "python3"}, "python"),
        ({"workdir": "../../etc"}, "workdir"),
        ({"workdir": "a/../../b"}, "workdir"),
        ({"entry": "../../train.py"}, "entry"),
        ({"entry": "/data/../etc/train.py"}, "entry"),
    ],
)
def test_values_too_big_or_escaping_are_refused(api, cpu_host, extra, field) -> None:
    response = api.post("/api/v1/runs/", {**TRAINING, **extra}, format="json")
    assert response.status_code == 400
    assert field in response.json()


@pytest.mark.parametrize(
    "extra",
    [
        {"workdir": "sub/dir"},
        {"workdir": "/data/alice/project"},  # a checkout of the user's code on the host
        {"python": "/opt/conda/bin/python"},
        {"entry": "/data/alice/train.py"},
        {"entry": "src/train.py"},
    ],
)
def test_paths_on_the_host_or_inside_the_run_dir_are_fine(api, cpu_host, extra) -> None:
    response = api.post("/api/v1/runs/", {**TRAINING, **extra}, format="json")
    assert response.status_code == 201, response.json()


@pytest.mark.parametrize(
    ("device", "field"),
    [
        ({"index": 0, "name": "a\x00b"}, "devices"),
        ({"index": 0, "name": "npu", "bus": "a\x00b"}, "devices"),
        ({"index": BIG, "name": "npu"}, "devices"),
    ],
)
def test_register_device_fields(host_api, device, field) -> None:
    body = {"device_type": "cpu", "devices": [device], "hostname": "h"}
    response = host_api.post(f"{AGENT}/register/", body, format="json")
    assert response.status_code in (200, 400)
    if response.status_code == 400:
        assert field in response.json()


def test_register_hostname_with_nul(host_api) -> None:
    body = {"device_type": "cpu", "devices": [{"index": 0, "name": "c"}], "hostname": "a\x00"}
    response = host_api.post(f"{AGENT}/register/", body, format="json")
    assert response.status_code == 400
    assert "hostname" in response.json()


def test_form_bodies_nested_deep(client, owner) -> None:
    client.force_login(owner)
    deep = "[" * 100_000 + "]" * 100_000
    response = client.post("/runs/new/", {"spec": deep})
    assert response.status_code in (200, 400)


def test_json_encoding_sanity() -> None:
    # The deep document really is deeper than Python's recursion limit.
    with pytest.raises(RecursionError):
        json.loads("[" * 100_000 + "]" * 100_000)


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/runs/5/checkpoints/0/download/",
        "/api/v1/runs/5/checkpoints/0/pin/",
        "/api/v1/agent/runs/5/checkpoints/0/",
        "/runs/5/checkpoints/0/pin/",
    ],
)
def test_a_checkpoint_of_step_0_has_a_url_and_one_past_64_bits_has_none(url: str) -> None:
    assert resolve(url).kwargs["step"] == 0
    with pytest.raises(Resolver404):
        resolve(url.replace("/0/", f"/{2**63}/"))
