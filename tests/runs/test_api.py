from __future__ import annotations

import pytest
from django.urls import reverse

from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import NO_HOST_HINT, do_claim_run, do_ingest_events, do_submit_run
from tests.factories import RunFactory

# A host that could take the runs: without one a submission is refused.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("cpu_host")]
RUNS = "/api/v1/runs/"
SMOKE = {"kind": "smoke", "device_type": "cpu"}


def test_anonymous_callers_are_asked_for_a_token(anon_api) -> None:
    response = anon_api.get(RUNS)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_an_unknown_token_is_refused(anon_api) -> None:
    anon_api.credentials(HTTP_AUTHORIZATION="Token npl_not-a-real-token")
    assert anon_api.get(RUNS).status_code == 401


def test_a_host_token_cannot_use_the_user_api(host_api) -> None:
    response = host_api.get(RUNS)
    assert response.status_code == 403
    assert "host tokens may only call /api/v1/agent/" in response.json()["detail"]


def test_submit_queues_the_run_and_returns_it(
    api, owner, sent_tasks, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(RUNS, {**SMOKE, "name": "first", "train_steps": 10}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert (body["status"], body["name"], body["submitted_by"]) == ("queued", "first", "owner")
    assert body["spec"]["train_steps"] == 10
    assert body["web_url"].endswith(f"/runs/{body['id']}/")
    # Placed only once the run is committed: alone in the queue, at once (its host is free).
    assert sent_tasks == [
        {"task": "runs.execute_run", "args": [body["id"], 1], "queue": "host.cpu-01"}
    ]


KINDS = "collectives, coverage, echo, parity, smoke, stability, training"


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        (
            {"kind": "teleport", "device_type": "cpu"},
            {"kind": ["unknown kind 'teleport'; one of: " + KINDS]},
        ),
        ({**SMOKE, "devices": 0}, {"devices": ["must be at least 1"]}),
        ({**SMOKE, "matmul_size": "big"}, {"matmul_size": ["must be an integer"]}),
        (
            {**SMOKE, "host": "no-such-host"},
            {"host": ["no host named 'no-such-host'; the hosts are cpu-01" + NO_HOST_HINT]},
        ),
        (
            {"device_type": "cpu"},
            {"kind": ["this field is required; one of: " + KINDS]},
        ),
        ([SMOKE], {"spec": ["must be a JSON object"]}),
    ],
)
def test_bad_submissions_get_400_naming_the_field(api, body: object, errors: dict) -> None:
    response = api.post(RUNS, body, format="json")
    assert response.status_code == 400
    # Each field's messages at the top level, beside the code and a detail for people.
    detail = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in errors.items())
    assert response.json() == {"code": "invalid", "detail": detail, **errors}
    assert Run.objects.count() == 0


def test_a_form_post_is_refused_as_the_wrong_media_type(api) -> None:
    assert api.post(RUNS, SMOKE).status_code == 415


def test_malformed_json_is_a_400(api) -> None:
    response = api.generic("POST", RUNS, "{kind: smoke", content_type="application/json")
    assert response.status_code == 400


def test_unknown_run_is_404(api) -> None:
    assert api.get(f"{RUNS}999999/").status_code == 404


def test_run_detail_has_steps_and_redacted_spec(api, owner, cpu_host) -> None:
    run = do_submit_run(owner, {**SMOKE, "env": {"API_KEY": "sekrit-value"}})
    place_queued_runs()
    do_claim_run(cpu_host, run.pk, 1)
    step = {"type": "step", "time": 1.0, "name": "device", "status": "pass", "seconds": 0.5}
    do_ingest_events(cpu_host, run.pk, 1, 0, 10, [step])
    body = api.get(f"{RUNS}{run.pk}/").json()
    assert body["status"] == "running"
    assert body["host"] == "cpu-01"
    assert body["spec"]["env"] == {"API_KEY": "<redacted>"}
    assert [(s["name"], s["status"]) for s in body["steps"]] == [("device", "pass")]


def test_the_list_filters_and_costs_a_fixed_number_of_queries(
    api, owner, django_assert_max_num_queries
) -> None:
    RunFactory.create_batch(5, submitted_by=owner)
    RunFactory.create_batch(3, status=Run.Status.FAILED, submitted_by=owner)
    with django_assert_max_num_queries(4):
        body = api.get(RUNS, {"status": "failed"}).json()
    assert body["count"] == 3
    assert {run["status"] for run in body["results"]} == {"failed"}


def test_cancel_is_for_the_submitter_and_staff(api, other_api, owner, staff) -> None:
    run = do_submit_run(owner, SMOKE)
    assert other_api.post(f"{RUNS}{run.pk}/cancel/").status_code == 403
    response = api.post(f"{RUNS}{run.pk}/cancel/")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert api.post(f"{RUNS}{run.pk}/cancel/").status_code == 409


def test_staff_may_cancel_any_run(owner, staff) -> None:
    from tests.conftest import token_client

    run = do_submit_run(owner, SMOKE)
    assert token_client(staff).post(f"{RUNS}{run.pk}/cancel/").json()["status"] == "cancelled"


def test_events_and_metrics_are_readable_by_type_and_key(api, owner, cpu_host) -> None:
    run = do_submit_run(owner, SMOKE)
    place_queued_runs()
    do_claim_run(cpu_host, run.pk, 1)
    events = [{"type": "log", "time": 1.0, "stream": "stdout", "line": f"l{i}"} for i in range(3)]
    events += [
        {"type": "metric", "time": 1.0, "key": "loss", "step": s, "value": 1 / (s + 1)}
        for s in range(4)
    ]
    do_ingest_events(cpu_host, run.pk, 1, 0, 10, events)

    logs = api.get(f"{RUNS}{run.pk}/events/", {"type": "log"}).json()
    assert [event["data"]["line"] for event in logs["results"]] == ["l0", "l1", "l2"]
    # The run list's filters do not apply here: the running run is still found.
    assert api.get(f"{RUNS}{run.pk}/events/", {"status": "queued"}).json()["count"] == 3
    assert api.get(f"{RUNS}{run.pk}/checkpoints/", {"status": "queued", "limit": 1}).json() == []
    first_id = logs["results"][0]["id"]
    later = api.get(f"{RUNS}{run.pk}/events/", {"after": first_id}).json()
    assert [event["data"]["line"] for event in later["results"]] == ["l1", "l2"]
    assert api.get(f"{RUNS}{run.pk}/events/", {"after": "x"}).status_code == 400

    assert api.get(f"{RUNS}{run.pk}/metrics/").json() == {
        "metrics": [{"key": "loss", "source": "track", "points": 4, "last_step": 3}]
    }
    series = api.get(f"{RUNS}{run.pk}/metrics/", {"key": "loss"}).json()
    assert series == {
        "key": "loss",
        "total": 4,
        "downsampled": False,
        "points": [[0, 1.0], [1, 0.5], [2, 1 / 3], [3, 0.25]],
    }
    assert api.get(f"{RUNS}{run.pk}/metrics/", {"key": "loss", "points": "0"}).status_code == 400


def test_long_series_are_downsampled_in_the_database(api, owner, cpu_host) -> None:
    run = do_submit_run(owner, SMOKE)
    place_queued_runs()
    do_claim_run(cpu_host, run.pk, 1)
    points = [
        {"type": "metric", "time": 1.0, "key": "loss", "step": s, "value": float(s % 10)}
        for s in range(1000)
    ]
    points[555]["value"] = 99.0  # a spike must survive downsampling
    do_ingest_events(cpu_host, run.pk, 1, 0, 10, points)
    body = api.get(f"{RUNS}{run.pk}/metrics/", {"key": "loss", "points": 10}).json()
    assert (body["total"], body["downsampled"], len(body["points"])) == (1000, True, 10)
    first_step, mean, low, high = body["points"][0]
    assert (first_step, mean, low, high) == (0, 4.5, 0.0, 9.0)
    assert body["points"][5][3] == 99.0
    assert [p[0] for p in body["points"]] == list(range(0, 1000, 100))


def test_schema_and_docs_are_served_without_login(anon_api) -> None:
    assert anon_api.get(reverse("schema")).status_code == 200
    docs = anon_api.get(reverse("api-docs"))
    assert docs.status_code == 200
    # Swagger UI comes from the vendored sidecar, not a CDN.
    assert b"drf_spectacular_sidecar" in docs.content
    assert b"cdn." not in docs.content
