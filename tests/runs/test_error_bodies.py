"""Every error the API answers has a machine-readable ``code`` and a human ``detail``."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache

from npulab.core.errors import ERROR_CODES
from npulab.runs.services import do_cancel_run, do_submit_run
from tests.paths import REPO_DIR

# A host that could take the runs: without one a submission is refused.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("cpu_host")]
RUNS = "/api/v1/runs/"
SMOKE = {"kind": "smoke", "device_type": "cpu"}


def error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["code"] == code
    assert isinstance(body["detail"], str)
    assert body["detail"]
    assert code in ERROR_CODES
    assert ERROR_CODES[code][0] == status
    return body


def test_400_keeps_each_field_beside_code_and_detail(api) -> None:
    body = error(
        api.post(RUNS, {**SMOKE, "devices": 0, "priority": 5000}, format="json"), 400, "invalid"
    )
    assert body["devices"] == ["must be at least 1"]
    assert body["priority"] == ["must be an integer from -1000 to 1000"]
    assert body["detail"] == (
        "devices: must be at least 1; priority: must be an integer from -1000 to 1000"
    )


def test_400_of_a_query_parameter_names_it(api, owner) -> None:
    run = do_submit_run(owner, SMOKE)
    body = error(api.get(f"{RUNS}{run.pk}/events/", {"after": "x"}), 400, "invalid")
    assert body["after"] == ["must be an event id"]


def test_400_for_json_that_does_not_parse(api) -> None:
    response = api.generic("POST", RUNS, "{kind: smoke", content_type="application/json")
    assert "JSON parse error" in error(response, 400, "parse_error")["detail"]


def test_401_without_a_token_and_with_a_bad_one(anon_api) -> None:
    error(anon_api.get(RUNS), 401, "not_authenticated")
    anon_api.credentials(HTTP_AUTHORIZATION="Token npl_nope")
    assert error(anon_api.get(RUNS), 401, "authentication_failed")["detail"] == "Invalid token."
    anon_api.credentials(HTTP_AUTHORIZATION="Token two words")
    error(anon_api.get(RUNS), 401, "authentication_failed")


def test_403_for_another_users_run(other_api, owner) -> None:
    run = do_submit_run(owner, SMOKE)
    body = error(other_api.post(f"{RUNS}{run.pk}/cancel/"), 403, "permission_denied")
    assert body["detail"] == (
        "Only the run's submitter, its project's owners or staff may cancel it."
    )


def test_404_for_an_object_and_for_an_unknown_api_url(api) -> None:
    error(api.get(f"{RUNS}999999/"), 404, "not_found")
    error(api.get("/api/v1/kinds/teleport/"), 404, "not_found")
    body = error(api.get("/api/v1/no-such-thing/"), 404, "not_found")
    assert body["detail"] == "No API endpoint at /api/v1/no-such-thing/."


def test_405_for_a_method_the_url_does_not_take(api, owner) -> None:
    run = do_submit_run(owner, SMOKE)
    body = error(api.put(f"{RUNS}{run.pk}/", SMOKE, format="json"), 405, "method_not_allowed")
    assert '"PUT"' in body["detail"]


def test_409_for_a_run_that_already_ended(api, owner) -> None:
    run = do_submit_run(owner, SMOKE)
    do_cancel_run(run.pk, owner)
    body = error(api.post(f"{RUNS}{run.pk}/cancel/"), 409, "conflict")
    assert "already cancelled" in body["detail"]


def test_415_for_a_form_post(api) -> None:
    error(api.post(RUNS, SMOKE), 415, "unsupported_media_type")


def test_429_past_the_rate(api, settings) -> None:
    settings.NPULAB = {**settings.NPULAB, "API_RATE": (1, 60)}
    cache.clear()
    try:
        api.get(RUNS)
        response = api.get(RUNS)
        error(response, 429, "throttled")
        assert int(response["Retry-After"]) >= 1
    finally:
        cache.clear()


def test_the_agent_api_answers_alike(host_api, settings) -> None:
    settings.NPULAB = {**settings.NPULAB, "MAX_SNAPSHOT_BYTES": 64 * 1024}
    big = {"snapshot": {"padding": "x" * 70 * 1024}}
    body = error(
        host_api.post("/api/v1/agent/snapshots/", big, format="json"), 413, "payload_too_large"
    )
    assert "NPULAB_MAX_SNAPSHOT_BYTES" in body["detail"]
    bad = host_api.post("/api/v1/agent/runs/999999/claim/", {"attempt": 1}, format="json")
    error(bad, 404, "not_found")


def test_every_code_is_documented() -> None:
    text = (REPO_DIR / "docs/api.md").read_text()
    section = text.split("## Errors", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", section, re.M))
    assert documented == set(ERROR_CODES)
