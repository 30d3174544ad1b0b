"""POST /api/v1/agent/telemetry/: host token only, per-sample rejections, 400s naming the field."""

from __future__ import annotations

import time

import pytest
from rest_framework.test import APIClient

from npulab.hosts.services import do_issue_host_token
from npulab.telemetry.models import DeviceTelemetry
from workers.contract.telemetry import MAX_BATCH, sample

pytestmark = pytest.mark.django_db
URL = "/api/v1/agent/telemetry/"


@pytest.fixture
def npu_agent(npu_host) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {do_issue_host_token(npu_host)}")
    return client


def test_a_batch_is_answered_with_what_was_accepted_and_rejected(npu_agent, samples_at) -> None:
    batch = samples_at(time.time())
    batch[2]["readings"]["power_w"] = None  # a sampler bug: a reading that is not a number
    response = npu_agent.post(URL, {"samples": batch}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["accepted"] == 7
    assert body["rejected"] == [
        {"index": 2, "field": "readings.power_w", "message": "must be a number"}
    ]
    assert DeviceTelemetry.objects.filter(host__name="npu-01").count() == 7
    again = npu_agent.post(URL, {"samples": batch}, format="json").json()
    assert (again["accepted"], again["stored"]) == (7, 0)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "the body must be an object"),
        ({}, "This field is required."),
        ({"samples": {"time": 1}}, "must be a list of samples"),
        ({"samples": [{}] * (MAX_BATCH + 1)}, f"at most {MAX_BATCH} samples a batch"),
    ],
)
def test_a_malformed_body_is_a_400_naming_samples(npu_agent, body, message) -> None:
    response = npu_agent.post(URL, body, format="json")
    assert response.status_code == 400
    assert message in str(response.json()["samples"])
    assert not DeviceTelemetry.objects.exists()


def test_only_a_host_token_may_send_telemetry(api, anon_api) -> None:
    body = {"samples": [sample(time.time(), 0, "OK", {"power_w": 1.0})]}
    assert api.post(URL, body, format="json").status_code == 403
    assert anon_api.post(URL, body, format="json").status_code == 401
    assert not DeviceTelemetry.objects.exists()
