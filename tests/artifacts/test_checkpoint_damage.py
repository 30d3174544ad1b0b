"""A stored checkpoint corrupted after its upload: never served, never resumed from, never
the reason the good ones are deleted (issue 14, "a damaged stored checkpoint")."""

from __future__ import annotations

from django.core.files.base import ContentFile

from npulab.artifacts.models import Artifact
from npulab.artifacts.storage import artifact_storage
from npulab.checkpoints.models import Checkpoint
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from tests.artifacts.test_checkpoints import checkpoint, chunked, pytestmark  # noqa: F401
from tests.artifacts.test_uploads import sha
from tests.runs.test_attempts import crash, started


def weights(step: int) -> bytes:
    return f"weights at step {step} ".encode() * 40


def store_steps(host_api, run: Run, *steps: int) -> None:
    for step in steps:
        checkpoint(run, step, weights(step))
        assert chunked(host_api, run, step, weights(step)).json()["status"] == "stored"


def corrupt(run: Run, step: int) -> None:
    """The stored file changes under the platform: same key, other bytes (a disk, a hand)."""
    key = Checkpoint.objects.get(run=run, step=step).artifact.storage_key
    storage = artifact_storage()
    storage.delete(key)
    assert storage.save(key, ContentFile(weights(step)[::-1])) == key


def statuses(run: Run) -> list[tuple[int, str]]:
    return list(run.checkpoints.order_by("step").values_list("step", "status"))


def test_a_corrupt_stored_checkpoint_is_refused_on_download_and_marked_damaged(
    store, owner, cpu_host, host_api, api
) -> None:
    run = started(owner, cpu_host)
    store_steps(host_api, run, 100, 200)
    corrupt(run, 200)

    download = api.get(f"/api/v1/runs/{run.pk}/checkpoints/200/download/")
    assert download.status_code == 409
    assert download.json()["code"] == "checkpoint_damaged"
    assert "no longer matches" in download.json()["detail"]
    damaged = Checkpoint.objects.get(run=run, step=200)
    assert damaged.status == Checkpoint.Status.DAMAGED
    assert damaged.status_reason.startswith("on the platform: the stored file")
    assert damaged.artifact.status == Artifact.Status.DAMAGED
    # Marked damaged, it is not found as a stored checkpoint again.
    assert api.get(f"/api/v1/runs/{run.pk}/checkpoints/200/download/").status_code == 404
    good = api.get(f"/api/v1/runs/{run.pk}/checkpoints/100/download/")
    assert b"".join(good.streaming_content) == weights(100)


def test_the_next_attempt_resumes_from_the_newest_checkpoint_that_verifies(
    store, owner, cpu_host, host_api
) -> None:
    run = started(owner, cpu_host, max_restarts=1)
    store_steps(host_api, run, 100, 200, 300)
    corrupt(run, 300)
    run = crash(cpu_host, run)
    place_queued_runs()

    claim = host_api.post(f"/api/v1/agent/runs/{run.pk}/claim/", {"attempt": 2}, format="json")

    assert claim.json()["resume"] == {
        "step": 200,
        "bytes": len(weights(200)),
        "sha256": sha(weights(200)),
    }
    assert statuses(run) == [(100, "stored"), (200, "stored"), (300, "damaged")]
    fetched = host_api.get(f"/api/v1/agent/runs/{run.pk}/checkpoints/200/")
    assert b"".join(fetched.streaming_content) == weights(200)


def test_retention_never_deletes_the_good_ones_because_of_a_corrupt_newer_one(
    store, owner, cpu_host, host_api
) -> None:
    run = started(owner, cpu_host, keep_checkpoints=2)
    store_steps(host_api, run, 100, 200)
    corrupt(run, 200)

    # A later attempt starts lower (it resumed from 100) and saves 150: ranked by step, the
    # corrupt 200 and the new 150 would be kept and 100, the only good older one, dropped.
    store_steps(host_api, run, 150)

    assert statuses(run) == [(100, "stored"), (150, "stored"), (200, "damaged")]
    assert sorted(store.keys()) == sorted(
        f"runs/{run.pk}/checkpoints/{step}/state.pt" for step in (100, 150, 200)
    )


def test_when_every_newer_checkpoint_is_corrupt_the_only_good_one_stays(
    store, owner, cpu_host, host_api
) -> None:
    run = started(owner, cpu_host, keep_checkpoints=2)
    store_steps(host_api, run, 100, 200, 300)
    corrupt(run, 200)
    corrupt(run, 300)

    # Ranked by step the two corrupt ones are "the newest two", and the only checkpoint
    # that can still be resumed from would be the one deleted.
    store_steps(host_api, run, 150)

    assert statuses(run) == [(100, "deleted"), (150, "stored"), (200, "damaged"), (300, "damaged")]


def test_an_attempt_that_ends_leaves_no_checkpoint_on_host_for_ever(
    store, owner, cpu_host, host_api
) -> None:
    run = started(owner, cpu_host, max_restarts=1)
    store_steps(host_api, run, 100)
    # 200 was saved and announced, then deleted on the host before its upload.
    checkpoint(run, 200, weights(200))

    run = crash(cpu_host, run)

    gone = Checkpoint.objects.get(run=run, step=200)
    assert (gone.status, gone.status_reason) == (
        "deleted",
        "not uploaded from cpu-01 before attempt 1 ended",
    )
    # Should the host send it after all (it kept the file), it is stored.
    assert chunked(host_api, run, 200, weights(200)).json()["status"] == "stored"
    assert statuses(run) == [(100, "stored"), (200, "stored")]
