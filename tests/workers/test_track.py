"""workers.track: checkpoints that survive crashes, retention, RNG, the Run API."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import threading
import types
from pathlib import Path

import pytest
import torch

from tests.paths import REPO_DIR
from workers.contract import script_env
from workers.events import iter_events
from workers.track import Run
from workers.track import checkpoint as checkpoints


def make_run(tmp_path: Path, **kwargs) -> Run:
    return Run(str(tmp_path / "run"), str(tmp_path / "run" / "checkpoints"), **kwargs)


def test_a_checkpoint_is_complete_or_absent(tmp_path: Path) -> None:
    directory = str(tmp_path)
    info = checkpoints.save(directory, 7, {"w": torch.ones(3)}, torch, keep=3)
    assert os.listdir(directory) == ["step-000000000007"]
    manifest = json.loads((Path(info.path) / "manifest.json").read_text())
    assert manifest["files"]["state.pt"] == {"bytes": info.bytes, "sha256": info.sha256}
    assert checkpoints.verify(directory, 7).sha256 == info.sha256
    # A write cut short by a crash leaves only a temporary directory, which is cleaned up.
    (tmp_path / ".step-000000000008.tmp-999999").mkdir()
    checkpoints.prune(directory, keep=3)
    assert checkpoints.complete(directory) == [7]
    assert not (tmp_path / ".step-000000000008.tmp-999999").exists()


def test_damage_is_detected(tmp_path: Path) -> None:
    directory = str(tmp_path)
    info = checkpoints.save(directory, 1, {"w": torch.ones(3)}, torch, keep=3)
    with open(info.state_path, "r+b") as handle:
        handle.seek(10)
        handle.write(b"\x00\xff")
    with pytest.raises(ValueError, match="fails its SHA-256 check"):
        checkpoints.verify(directory, 1)
    with open(info.state_path, "ab") as handle:
        handle.write(b"more")
    with pytest.raises(ValueError, match="bytes, the manifest says"):
        checkpoints.verify(directory, 1)
    os.unlink(Path(info.path) / "manifest.json")
    with pytest.raises(ValueError, match="no readable manifest"):
        checkpoints.verify(directory, 1)


def large_state() -> dict:
    # Tensors above the writer's overlap size take the path through the I/O thread.
    return {"big": torch.randn(3, 400_000), "small": torch.arange(10), "step": 3}


def test_a_large_checkpoint_verifies_loads_and_detects_damage(tmp_path: Path) -> None:
    directory = str(tmp_path)
    state = large_state()
    info = checkpoints.save(directory, 3, state, torch, keep=3)
    data = Path(info.state_path).read_bytes()
    assert (info.bytes, info.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    loaded = checkpoints.load(checkpoints.verify(directory, 3), torch)
    assert torch.equal(loaded["big"], state["big"])
    assert torch.equal(loaded["small"], state["small"])
    assert not [t for t in threading.enumerate() if t.name.startswith("checkpoint-write")]
    with open(info.state_path, "r+b") as handle:
        handle.seek(len(data) // 2)
        handle.write(bytes([data[len(data) // 2] ^ 1]))
    with pytest.raises(ValueError, match="fails its SHA-256 check"):
        checkpoints.verify(directory, 3)


class CrcSpy:
    """Pickled inside torch.save: records the CRC32 option in force at that moment."""

    seen: list = []

    def __reduce__(self) -> tuple:
        CrcSpy.seen.append(torch.serialization.get_crc32_options())
        return (int, (0,))


class Unpicklable:
    def __reduce__(self) -> tuple:
        raise TypeError("not today")


@pytest.mark.parametrize("before", [True, False])
def test_the_crc32_option_is_off_during_a_save_and_restored_after(
    tmp_path: Path, before: bool
) -> None:
    torch.serialization.set_crc32_options(before)
    CrcSpy.seen = []
    try:
        checkpoints.save(str(tmp_path), 1, {"spy": CrcSpy(), **large_state()}, torch, keep=3)
        assert CrcSpy.seen == [False]
        assert torch.serialization.get_crc32_options() is before
        with pytest.raises(TypeError, match="not today"):
            checkpoints.save(str(tmp_path), 2, {"bad": Unpicklable()}, torch, keep=3)
        assert torch.serialization.get_crc32_options() is before
    finally:
        torch.serialization.set_crc32_options(True)
    assert checkpoints.complete(str(tmp_path)) == [1]
    assert not [t for t in threading.enumerate() if t.name.startswith("checkpoint-write")]


def test_a_torch_without_the_crc32_option_still_saves(tmp_path: Path) -> None:
    old_torch = types.SimpleNamespace(save=torch.save)
    info = checkpoints.save(str(tmp_path), 1, {"w": torch.ones(3)}, old_torch, keep=3)
    assert checkpoints.verify(str(tmp_path), 1).sha256 == info.sha256


def test_the_newest_valid_checkpoint_wins_and_damaged_ones_are_reported(tmp_path: Path) -> None:
    directory = str(tmp_path)
    for step in (10, 20, 30):
        checkpoints.save(directory, step, {"step": step}, torch, keep=5)
    with open(Path(directory) / "step-000000000030" / "state.pt", "ab") as handle:
        handle.write(b"x")
    skipped = []
    info = checkpoints.latest_valid(directory, lambda step, why: skipped.append((step, why)))
    assert info.step == 20
    assert skipped[0][0] == 30


def test_retention_keeps_the_newest_and_the_pinned(tmp_path: Path) -> None:
    directory = str(tmp_path)
    checkpoints.save(directory, 1, {}, torch, keep=2)
    checkpoints.set_pinned(directory, {1})
    for step in (2, 3, 4, 5):
        checkpoints.save(directory, step, {}, torch, keep=2)
    assert checkpoints.complete(directory) == [1, 4, 5]


def test_under_a_host_worker_nothing_is_pruned_before_its_upload(
    tmp_path: Path, monkeypatch
) -> None:
    # The platform is out of reach: the host worker has settled (uploaded) only step 1.
    monkeypatch.setenv(script_env.RUN_ID, "42")
    directory = str(tmp_path)
    for step in (1, 2, 3, 4):
        checkpoints.save(directory, step, {}, torch, keep=2)
        if step == 1:
            checkpoints.settle(directory, 1)
    assert checkpoints.complete(directory) == [2, 3, 4]
    # Back online, the uploader settles them; the next save prunes to ``keep`` again.
    for step in (2, 3, 4):
        checkpoints.settle(directory, step)
    checkpoints.save(directory, 5, {}, torch, keep=2)
    assert checkpoints.complete(directory) == [4, 5]
    # A pruned step's mark goes with it; a step saved anew must be uploaded anew.
    assert not checkpoints.settled(directory, 2)
    checkpoints.save(directory, 4, {"again": 1}, torch, keep=2)
    assert not checkpoints.settled(directory, 4)


def test_log_writes_metrics_and_heartbeats(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    run.log(0, loss=2.5, lr=0.1)
    run.log(1, loss=float("nan"))
    run.events.flush()
    events = list(iter_events(str(tmp_path / "run" / "events.jsonl")))
    assert [(e["key"], e["step"], e["value"]) for e in events] == [
        ("loss", 0, 2.5),
        ("lr", 0, 0.1),
        ("loss", 1, None),
    ]
    assert (tmp_path / "run" / "heartbeat.0").exists()


def test_other_ranks_beat_but_log_and_checkpoint_nothing(tmp_path: Path) -> None:
    run = make_run(tmp_path, rank=1, world_size=2)
    run.log(0, loss=1.0)
    assert run.save_checkpoint(0, model=torch.nn.Linear(2, 2)) is None
    run.events.flush()
    assert list(iter_events(str(tmp_path / "run" / "events.jsonl"))) == []
    assert (tmp_path / "run" / "heartbeat.1").exists()


def test_a_rank_named_in_metric_ranks_logs_under_keys_of_its_own(tmp_path: Path) -> None:
    asked = make_run(tmp_path / "a", rank=3, world_size=4, metric_ranks=[0, 3])
    asked.log(5, loss=0.5)
    asked.events.flush()
    events = list(iter_events(str(tmp_path / "a" / "run" / "events.jsonl")))
    assert [(e["key"], e["step"], e["value"]) for e in events] == [("loss@rank3", 5, 0.5)]
    other = make_run(tmp_path / "b", rank=2, world_size=4, metric_ranks=[0, 3])
    other.log(5, loss=0.5)
    other.events.flush()
    assert list(iter_events(str(tmp_path / "b" / "run" / "events.jsonl"))) == []


def test_metric_ranks_come_from_the_environment(tmp_path: Path) -> None:
    env = {script_env.RUN_DIR: str(tmp_path), "RANK": "2", script_env.METRIC_RANKS: "all"}
    assert Run.from_environment(env).logs_metrics
    assert not Run.from_environment(dict(env, **{script_env.METRIC_RANKS: "0,3"})).logs_metrics
    # A script started by hand, outside npulab: rank 0's alone.
    assert not Run.from_environment({script_env.RUN_DIR: str(tmp_path), "RANK": "1"}).logs_metrics


def test_save_and_resume_restore_model_optimizer_and_rng(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    run = make_run(tmp_path, keep_checkpoints=2)
    random.seed(5)
    run.save_checkpoint(41, model=model, optimizer=optimizer, data_position=42, extra={"x": 1})
    expected_python, expected_torch = random.random(), torch.rand(1)

    fresh = torch.nn.Linear(4, 2)
    fresh_optimizer = torch.optim.Adam(fresh.parameters(), lr=0.1)
    resumed = make_run(tmp_path).resume()
    assert (resumed.step, resumed.data_position, resumed.extra) == (41, 42, {"x": 1})
    resumed.restore(model=fresh, optimizer=fresh_optimizer)
    assert torch.equal(fresh.weight, model.weight)
    assert fresh_optimizer.state_dict()["state"][0]["step"] == 1
    # The random streams go on exactly where they were at the checkpoint.
    assert (random.random(), torch.rand(1)) == (expected_python, expected_torch)
    events = list(iter_events(str(tmp_path / "run" / "events.jsonl")))
    assert [e["type"] for e in events] == ["checkpoint", "resume", "log"]
    assert events[0]["step"] == 41


def sharded_save(tmp_path: Path, step: int, ranks: range, world_size: int = 3) -> None:
    """Each rank saves its own weights (its rank everywhere) as its shard of ``step``."""
    for rank in ranks:
        model = torch.nn.Linear(2, 2)
        torch.nn.init.constant_(model.weight, float(rank))
        run = make_run(tmp_path, rank=rank, world_size=world_size, keep_checkpoints=5)
        run.save_checkpoint(step, model=model, sharded=True)
        run.events.flush()


def test_a_sharded_checkpoint_is_one_shard_per_rank_each_announced(tmp_path: Path) -> None:
    sharded_save(tmp_path, 7, range(3))
    root = tmp_path / "run" / "checkpoints"
    assert (root / "step-000000000007" / "state.pt").exists()
    assert checkpoints.shard_ranks(str(root)) == [1, 2]
    shard = checkpoints.verify(checkpoints.shard_dir(str(root), 2), 7)
    assert checkpoints.shard_count(shard) == 3
    events = list(iter_events(str(tmp_path / "run" / "events.jsonl")))
    assert [(e["step"], e["rank"], e["shards"], e["bytes"]) for e in events] == [
        (7, rank, 3, checkpoints.verify(checkpoints.shard_dir(str(root), rank), 7).bytes)
        for rank in range(3)
    ]


def resumed_weight(tmp_path: Path, rank: int, **env: str) -> float | None:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        found = make_run(tmp_path, rank=rank, world_size=3, attempt=2).resume()
    return None if found is None else float(found.state["model"]["weight"][0, 0])


def test_every_rank_resumes_its_own_shard_of_one_step(tmp_path: Path) -> None:
    sharded_save(tmp_path, 10, range(3))
    # Step 20 reached ranks 0 and 1 only: no rank resumes from it.
    sharded_save(tmp_path, 20, range(2))
    assert [resumed_weight(tmp_path, rank) for rank in range(3)] == [0.0, 1.0, 2.0]
    rank_0 = make_run(tmp_path, rank=0, world_size=3, attempt=2).resume()
    assert rank_0.step == 10
    # Under a host worker, the step the platform named (every shard of it stored).
    named = {script_env.RESUME_STEP: "10"}
    assert [resumed_weight(tmp_path, rank, **named) for rank in range(3)] == [0.0, 1.0, 2.0]


def test_a_rank_without_its_shard_of_the_named_step_refuses_to_go_on(tmp_path: Path) -> None:
    sharded_save(tmp_path, 10, range(2))
    with pytest.raises(RuntimeError, match="rank 2 has no usable shard of the checkpoint"):
        resumed_weight(tmp_path, 2, **{script_env.RESUME_STEP: "10"})


def test_a_rank_that_exits_stops_counting_for_the_watchdog(tmp_path: Path) -> None:
    script = (
        "import os, sys; from workers import track; run = track.init(); run.heartbeat();"
        " print(os.path.exists(os.path.join(sys.argv[1], 'heartbeat.1')))"
    )
    env = {
        **os.environ,
        script_env.RUN_DIR: str(tmp_path),
        "RANK": "1",
        "PYTHONPATH": str(REPO_DIR),
    }
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], env=env, capture_output=True, text=True
    )
    assert (done.returncode, done.stdout.strip()) == (0, "True"), done.stderr
    assert not (tmp_path / "heartbeat.1").exists()


def test_resume_without_checkpoints_is_none(tmp_path: Path) -> None:
    assert make_run(tmp_path).resume() is None
    # A first attempt has nothing to take back on the platform.
    assert list(iter_events(str(tmp_path / "run" / "events.jsonl"))) == []


def test_a_later_attempt_without_checkpoints_says_it_starts_over(tmp_path: Path) -> None:
    assert make_run(tmp_path, attempt=3).resume() is None
    events = list(iter_events(str(tmp_path / "run" / "events.jsonl")))
    assert [(e["type"], e.get("step", "-")) for e in events] == [("resume", None), ("log", "-")]
    assert events[1]["line"].endswith("attempt 3: no checkpoint to resume from; starting over")


def test_checkpoint_cadence(tmp_path: Path) -> None:
    run = make_run(tmp_path, every_steps=50)
    assert [step for step in range(200) if run.checkpoint_due(step)] == [49, 99, 149, 199]
    assert not make_run(tmp_path).checkpoint_due(49)
