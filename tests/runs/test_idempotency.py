"""``POST /api/v1/runs/`` with an Idempotency-Key: a retried submission queues one run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from npulab.runs import services
from npulab.runs.models import Run
from npulab.runs.services import do_cancel_run
from tests.conftest import token_client

# A host that could take the runs: without one a submission is refused.
pytestmark = pytest.mark.usefixtures("cpu_host")
RUNS = "/api/v1/runs/"
SMOKE = {"kind": "smoke", "device_type": "cpu", "name": "nightly"}


def post(client: Any, body: Any, key: str | None) -> Any:
    headers = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    return client.post(RUNS, body, format="json", **headers)


@pytest.mark.django_db
def test_the_same_key_twice_queues_one_run_and_replays_it(
    api, sent_tasks, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        first = post(api, SMOKE, "ci-job-4711")
    assert first.status_code == 201
    assert "Idempotent-Replayed" not in first
    with django_capture_on_commit_callbacks(execute=True):
        again = post(api, SMOKE, "ci-job-4711")
    assert again.status_code == 200
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert Run.objects.count() == 1
    # Placement was asked for once: the replay queued nothing.
    assert len(sent_tasks) == 1


@pytest.mark.django_db
def test_the_same_document_in_another_key_order_is_the_same_body(api) -> None:
    first = post(api, {"device_type": "cpu", "kind": "smoke"}, "k")
    again = api.generic(
        "POST",
        RUNS,
        '{ "kind": "smoke",\n  "device_type": "cpu" }',
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="k",
    )
    assert (first.status_code, again.status_code) == (201, 200)


@pytest.mark.django_db
def test_a_replay_answers_the_runs_state_now(api, owner) -> None:
    run_id = post(api, SMOKE, "k").json()["id"]
    do_cancel_run(run_id, owner)
    again = post(api, SMOKE, "k")
    assert (again.status_code, again.json()["status"]) == (200, "cancelled")


@pytest.mark.django_db
def test_the_same_key_with_another_body_is_a_409(api) -> None:
    run_id = post(api, SMOKE, "k").json()["id"]
    response = post(api, {**SMOKE, "name": "other"}, "k")
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "idempotency_conflict"
    assert body["run"] == run_id
    assert "different body" in body["detail"]
    assert Run.objects.count() == 1


@pytest.mark.django_db
def test_without_a_key_each_post_queues_a_run(api) -> None:
    assert [post(api, SMOKE, None).status_code for _ in range(2)] == [201, 201]
    assert Run.objects.count() == 2


@pytest.mark.django_db
def test_keys_belong_to_their_user(api, other_api) -> None:
    assert post(api, SMOKE, "shared").status_code == 201
    assert post(other_api, SMOKE, "shared").status_code == 201
    assert Run.objects.count() == 2


@pytest.mark.django_db
def test_a_refused_submission_keeps_no_key(api) -> None:
    assert post(api, {**SMOKE, "devices": 0}, "k").status_code == 400
    assert post(api, SMOKE, "k").status_code == 201


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", "x" * 201, "ключ", "tab\tin"])
def test_a_bad_key_is_a_400_naming_the_header(api, key: str) -> None:
    response = post(api, SMOKE, key)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid"
    assert body["Idempotency-Key"] == ["must be 1 to 200 printable ASCII characters"]
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_the_longest_key_is_taken(api) -> None:
    assert post(api, SMOKE, "k" * 200).status_code == 201


def post_at_once(clients: list[Any], key: str) -> list[Any]:
    """Each client posts the same submission in its own thread, released together."""
    barrier = threading.Barrier(len(clients))
    responses: list[Any] = [None] * len(clients)

    def send(index: int) -> None:
        try:
            barrier.wait(timeout=10)
            responses[index] = post(clients[index], SMOKE, key)
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return responses


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_with_one_key_queue_one_run(owner) -> None:
    clients = [token_client(owner) for _ in range(2)]
    for attempt in range(3):
        responses = post_at_once(clients, f"race-{attempt}")
        assert sorted(r.status_code for r in responses) == [200, 201]
        assert len({r.json()["id"] for r in responses}) == 1
    assert Run.objects.count() == 3


@pytest.mark.django_db(transaction=True)
def test_when_both_miss_the_lookup_the_database_picks_the_winner(owner, monkeypatch) -> None:
    # Hold both requests after their first lookup found nothing, so both insert:
    # the unique constraint refuses one, which then answers the winner's run.
    barrier = threading.Barrier(2)
    seen = threading.local()
    lookup: Callable[..., Any] = services._idempotent_replay

    def lookup_then_wait(*args: Any) -> Any:
        found = lookup(*args)
        if not getattr(seen, "waited", False):
            seen.waited = True
            barrier.wait(timeout=10)
        return found

    monkeypatch.setattr(services, "_idempotent_replay", lookup_then_wait)
    responses = post_at_once([token_client(owner) for _ in range(2)], "race")
    assert sorted(r.status_code for r in responses) == [200, 201]
    assert len({r.json()["id"] for r in responses}) == 1
    assert Run.objects.count() == 1
