"""Checkpoints sharded across a run's ranks: each host uploads its ranks' shards, and the
checkpoint is stored, a resume point, only once every shard has arrived."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from npulab.artifacts.models import Artifact
from npulab.checkpoints.capability import CHECKPOINTS
from npulab.checkpoints.models import Checkpoint, CheckpointShard
from npulab.checkpoints.services import resume_point
from npulab.hosts.services import do_issue_host_token
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_claim_run, do_ingest_events
from tests.artifacts.conftest import local_store  # noqa: F401 - a fixture used here
from tests.artifacts.test_host_uploader import write_checkpoint
from tests.artifacts.test_uploads import host_client, send, sha
from tests.conftest import token_client
from tests.runs.test_gangs import gang, host
from workers.contract.capabilities import RESUME_POINT
from workers.host.checkpoints import CheckpointUploader, fetch_for_resume
from workers.host.client import PlatformClient
from workers.track import checkpoint as checkpoints

# Every test stores its files in a local directory.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("local_store")]

WORLD = 4  # 2 hosts × 2 devices: ranks 0-1 on cpu-1, 2-3 on cpu-2
ranks_of = {"a": range(2), "b": range(2, 4)}


def payload(step: int, rank: int) -> bytes:
    return f"rank {rank} at step {step} ".encode() * 40


@pytest.fixture
def gang_run(owner: Any) -> tuple[Run, Any, Any]:
    a, b = host("cpu-1"), host("cpu-2")
    run = gang(owner, max_restarts=1, keep_checkpoints=1)
    place_queued_runs()
    do_claim_run(a, run.pk, 1)
    do_claim_run(b, run.pk, 1)
    run.refresh_from_db()
    return run, host_client(a), host_client(b)


def saved(step: int, rank: int) -> dict[str, Any]:
    data = payload(step, rank)
    return {
        "type": "checkpoint",
        "time": 1.0,
        "step": step,
        "path": f"/w/rank-{rank}/step-{step}",
        "bytes": len(data),
        "sha256": sha(data),
        "shards": WORLD,
        "rank": rank,
    }


def report(run: Run, offsets: dict[str, int], client_host: Any, events: list[dict]) -> None:
    """A host's batch of events, each host's file at its own offset."""
    start = offsets.get(client_host.name, 0)
    do_ingest_events(client_host, run.pk, 1, start, start + 10, events)
    offsets[client_host.name] = start + 10


def upload(client: Any, run: Run, step: int, rank: int, data: bytes | None = None) -> Any:
    data = payload(step, rank) if data is None else data
    name = "state.pt" if rank == 0 else f"rank{rank}-state.pt"
    declared = {
        "name": name,
        "kind": "checkpoint",
        "step": step,
        "bytes": len(payload(step, rank)),
        "sha256": sha(payload(step, rank)),
    }
    reply = client.post(f"/api/v1/agent/runs/{run.pk}/uploads/", declared, format="json")
    if reply.status_code != 201:
        return reply
    return send(client, run, reply.json()["id"], 0, data)


def shards_saved(run: Run, step: int, offsets: dict[str, int]) -> None:
    """Each host reports its two ranks' shards of ``step``."""
    hosts = {p.node_rank: p.host for p in run.placements.select_related("host")}
    report(run, offsets, hosts[0], [saved(step, 0), saved(step, 1)])
    report(run, offsets, hosts[1], [saved(step, 2), saved(step, 3)])


def test_a_sharded_checkpoint_is_stored_only_once_every_shard_is(gang_run, owner) -> None:
    run, a, b = gang_run
    shards_saved(run, 10, {})
    assert Checkpoint.objects.get(run=run).shards == WORLD
    assert CheckpointShard.objects.filter(run=run).count() == 3
    for client, rank in ((a, 0), (a, 1), (b, 2)):
        assert upload(client, run, 10, rank).json()["status"] == "stored"
    waiting = Checkpoint.objects.get(run=run, step=10)
    assert waiting.status == Checkpoint.Status.ON_HOST
    assert waiting.status_reason == "3 of 4 shards stored; waiting for rank(s) 3"
    assert resume_point(run) is None
    # A host sends only the shards of its own ranks.
    assert upload(b, run, 10, 1).status_code == 403
    assert upload(b, run, 10, 3).json()["status"] == "stored"
    whole = Checkpoint.objects.get(run=run, step=10)
    assert (whole.status, whole.status_reason) == (Checkpoint.Status.STORED, "")
    assert resume_point(run) == whole
    listed = token_client(owner).get(f"/api/v1/runs/{run.pk}/checkpoints/").json()
    assert (listed[0]["shards"], listed[0]["status"]) == (WORLD, "stored")
    shard = token_client(owner).get(f"/api/v1/runs/{run.pk}/checkpoints/10/download/?rank=3")
    assert b"".join(shard.streaming_content) == payload(10, 3)


def test_a_new_attempt_resumes_every_host_from_its_ranks_shards(gang_run, owner) -> None:
    run, a, b = gang_run
    shards_saved(run, 10, {})
    for client, rank in ((a, 0), (a, 1), (b, 2), (b, 3)):
        upload(client, run, 10, rank)
    run.refresh_from_db()
    point = CHECKPOINTS.claim_reply(run)[RESUME_POINT]
    assert point["step"] == 10
    assert point["shards"] == [
        {"rank": rank, "bytes": len(payload(10, rank)), "sha256": sha(payload(10, rank))}
        for rank in (1, 2, 3)
    ]
    fetched = b.get(f"/api/v1/agent/runs/{run.pk}/checkpoints/10/?rank=2")
    assert b"".join(fetched.streaming_content) == payload(10, 2)
    assert b.get(f"/api/v1/agent/runs/{run.pk}/checkpoints/10/?rank=x").status_code == 400
    assert b.get(f"/api/v1/agent/runs/{run.pk}/checkpoints/10/?rank=9").status_code == 404


def test_a_damaged_shard_makes_its_checkpoint_damaged(gang_run) -> None:
    run, a, b = gang_run
    shards_saved(run, 10, {})
    upload(a, run, 10, 0)
    upload(a, run, 10, 1)
    upload(b, run, 10, 2)
    bad = upload(b, run, 10, 3, data=b"x" * len(payload(10, 3)))
    assert bad.status_code == 422
    damaged = Checkpoint.objects.get(run=run, step=10)
    assert damaged.status == Checkpoint.Status.DAMAGED
    assert damaged.status_reason.startswith("the shard of rank 3: ")
    assert resume_point(run) is None


def test_retention_keeps_whole_steps_of_every_shard(gang_run) -> None:
    run, a, b = gang_run
    offsets: dict[str, int] = {}
    for step in (10, 20):
        shards_saved(run, step, offsets)
        for client, rank in ((a, 0), (a, 1), (b, 2), (b, 3)):
            upload(client, run, step, rank)
    # keep_checkpoints 1: step 20 with its 4 files stays, step 10 goes whole.
    kept = Artifact.objects.filter(run=run, status=Artifact.Status.STORED)
    assert sorted(kept.values_list("step", "name")) == [
        (20, "rank1-state.pt"),
        (20, "rank2-state.pt"),
        (20, "rank3-state.pt"),
        (20, "state.pt"),
    ]
    assert dict(Checkpoint.objects.filter(run=run).values_list("step", "status")) == {
        10: "deleted",
        20: "stored",
    }
    older = CheckpointShard.objects.filter(run=run, step=10)
    assert set(older.values_list("status", flat=True)) == {"deleted"}


def test_a_shard_event_naming_no_rank_of_its_shards_is_an_ingest_error(gang_run) -> None:
    run, _, _ = gang_run
    hosts = {p.node_rank: p.host for p in run.placements.select_related("host")}
    report(run, {}, hosts[0], [dict(saved(10, 0), rank=4)])
    assert not Checkpoint.objects.filter(run=run).exists()
    line = run.events.filter(type="log").values_list("data", flat=True).first()["line"]
    assert "checkpoint.rank must be 0 to shards - 1" in line


def write_shards(directory: Path, step: int, ranks: range) -> None:
    for rank in ranks:
        write_checkpoint(checkpoints.shard_dir(str(directory), rank), step, payload(step, rank))


@pytest.mark.django_db(transaction=True)
def test_each_host_sends_its_ranks_shards_and_fetches_them_to_resume(
    live_server, owner, tmp_path
) -> None:
    a, b = host("cpu-1"), host("cpu-2")
    run = gang(owner)
    place_queued_runs()
    do_claim_run(a, run.pk, 1)
    do_claim_run(b, run.pk, 1)
    shards_saved(run, 10, {})
    for name, ranks in ranks_of.items():
        write_shards(tmp_path / name, 10, ranks)
    for machine, name in ((a, "a"), (b, "b")):
        client = PlatformClient(live_server.url, do_issue_host_token(machine))
        # The uploader's keep-alive would keep the live server's database connection.
        client._headers["Connection"] = "close"
        uploader = CheckpointUploader(client, run.pk, str(tmp_path / name), chunk_bytes=300)
        # What the forwarder's acknowledgement had not handed over yet, the sweep finds.
        assert sorted(uploader.sweep()) == sorted((10, rank) for rank in ranks_of[name])
        assert uploader.drain()
    assert Checkpoint.objects.get(run=run, step=10).status == Checkpoint.Status.STORED
    run.refresh_from_db()
    resume = CHECKPOINTS.claim_reply(run)[RESUME_POINT]
    client = PlatformClient(live_server.url, do_issue_host_token(b))
    client._headers["Connection"] = "close"
    fresh = tmp_path / "b-again"
    note = fetch_for_resume(client, run.pk, str(fresh), resume, range(2, 4))
    assert note == (
        "fetched the checkpoint of step 10 from the platform; "
        "fetched the checkpoint of step 10 (rank 2's shard) from the platform; "
        "fetched the checkpoint of step 10 (rank 3's shard) from the platform"
    )
    assert checkpoints.shard_ranks(str(fresh)) == [2, 3]
    shard = checkpoints.verify(checkpoints.shard_dir(str(fresh), 3), 10)
    assert Path(shard.state_path).read_bytes() == payload(10, 3)
