"""A submission alone in the queue is placed as it commits, by the submitter's process.

The same placement pass as the control worker's (``place_queued_runs``), one broker
hop and one task earlier; behind other queued runs, or when that pass fails, the
control worker is asked as before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from npulab.runs import dispatch, scheduler
from npulab.runs.models import DeviceLease, Run
from npulab.runs.services import do_cancel_run, do_submit_run
from tests.conftest import token_client

SMOKE = {"kind": "smoke", "device_type": "cpu"}
PLACE = {"task": "runs.place_runs", "args": [], "queue": "control"}
ROUNDS = 5


def submit(owner: Any, **extra: Any) -> Run:
    return do_submit_run(owner, {**SMOKE, **extra})


@pytest.mark.django_db
def test_a_run_alone_in_the_queue_goes_to_its_host_as_the_submission_commits(
    owner, cpu_host, sent_tasks, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        run = submit(owner)
    run.refresh_from_db()
    assert (run.status, run.host, run.device_indices) == ("dispatched", cpu_host, [0])
    # The execute message, and no placement request: there is nothing left to place.
    assert sent_tasks == [{"task": "runs.execute_run", "args": [run.pk, 1], "queue": "host.cpu-01"}]


@pytest.mark.django_db
def test_alone_but_with_no_free_device_it_says_why_it_waits(
    owner, cpu_host, sent_tasks, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        busy = submit(owner)
    with django_capture_on_commit_callbacks(execute=True):
        waiting = submit(owner)
    waiting.refresh_from_db()
    assert waiting.status == "queued"
    assert waiting.queue_reason == "no online host with 1 free cpu device (cpu-01: 0 of 1 free)"
    assert [task["task"] for task in sent_tasks] == ["runs.execute_run"]
    # Its device freed, it goes as before: the control worker is asked.
    with django_capture_on_commit_callbacks(execute=True):
        do_cancel_run(busy.pk, owner)
    assert sent_tasks[-1] == PLACE


@pytest.mark.django_db
def test_behind_other_queued_runs_the_control_worker_places_it(
    owner, cpu_host, sent_tasks, django_capture_on_commit_callbacks
) -> None:
    submit(owner)  # its commit hook never runs here: it stays queued
    with django_capture_on_commit_callbacks(execute=True):
        run = submit(owner)
    assert sent_tasks == [PLACE]
    assert Run.objects.get(pk=run.pk).status == "queued"


@pytest.mark.django_db
def test_a_pass_that_fails_at_submission_is_left_to_the_control_worker(
    owner, cpu_host, sent_tasks, django_capture_on_commit_callbacks, monkeypatch, caplog
) -> None:
    def fail() -> list[int]:
        raise RuntimeError("database went away")

    monkeypatch.setattr(dispatch, "_placement_pass", fail)
    with caplog.at_level(logging.ERROR), django_capture_on_commit_callbacks(execute=True):
        run = submit(owner)
    assert sent_tasks == [PLACE]
    assert Run.objects.get(pk=run.pk).status == "queued"
    assert "could not place the submitted run at once" in caplog.text


def at_once(work: list[Callable[[], Any]]) -> list[Any]:
    """Each of ``work`` in a thread of its own, released together; results or exceptions."""
    barrier = threading.Barrier(len(work))
    results: list[Any] = [None] * len(work)

    def go(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = work[index]()
        except Exception as exc:
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


@pytest.mark.django_db(transaction=True)
def test_submissions_and_passes_racing_for_one_device_never_both_lease_it(owner, cpu_host) -> None:
    clients = [token_client(owner) for _ in range(2)]

    def post(index: int) -> Callable[[], Any]:
        return lambda: clients[index].post("/api/v1/runs/", SMOKE, format="json")

    for _ in range(ROUNDS):
        # Two submissions, each placed at once if alone, and two of the control worker's passes.
        results = at_once(
            [post(0), post(1), scheduler.place_queued_runs, scheduler.place_queued_runs]
        )
        assert [type(result) for result in results[2:]] == [list, list], results
        assert [response.status_code for response in results[:2]] == [201, 201]
        runs = [response.json()["id"] for response in results[:2]]
        scheduler.place_queued_runs()  # the control worker's next tick
        dispatched = list(Run.objects.filter(pk__in=runs, status="dispatched"))
        assert len(dispatched) == 1
        assert list(DeviceLease.objects.values_list("device_index", "run_id")) == [
            (0, dispatched[0].pk)
        ]
        waiting = Run.objects.get(pk__in=runs, status="queued")
        assert waiting.queue_reason == "no online host with 1 free cpu device (cpu-01: 0 of 1 free)"
        for run_id in runs:
            do_cancel_run(run_id, owner)
    assert not DeviceLease.objects.exists()
