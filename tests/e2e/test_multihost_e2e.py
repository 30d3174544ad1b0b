"""A run across hosts on one machine: two local CPU host workers, gloo, real processes; and
a parity run with its two sides on the two hosts, side A's dump handed to side B's host.

Its own stack (two hosts of two devices each, advertising 127.0.0.1), so that the
shared e2e platform's single host keeps its own runs. With the MindSpore interpreter
(`make mindspore`) the hosts offer it too, for a MindSpore run across them through msrun.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from harness.polling import pauses
from harness.stack import Platform, launched_platform
from tests.e2e.conftest import write_script
from tests.mindspore.interpreter import (
    PARALLEL_SCRIPT,
    has_mindspore,
    mindspore_python,
    require_mindspore,
)

pytestmark = pytest.mark.e2e
HOSTS = ("gang-1", "gang-2")


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    with launched_platform(
        settings.SERVICES,
        tmp_path_factory.mktemp("multihost"),
        database=f"npulab_multihost_e2e_{os.getpid()}",
        host_worker=False,
    ) as platform:
        for host in HOSTS:
            start_worker(platform, host)
        platform.wait_online(*HOSTS, timeout=120)
        yield platform


def start_worker(platform: Platform, host: str) -> None:
    """A host worker of two devices, offering the MindSpore interpreter where there is one."""
    offer = ("--mindspore-python", mindspore_python()) if has_mindspore() else ()
    platform.start_worker(host, *offer, devices=2, labels="mindspore" if offer else "")


def ended_early(platform: Platform, run: dict) -> str:
    """What a run that ended too soon went through, in full (an assertion's repr is cut)."""
    return "\n".join(
        [json.dumps(run["attempts"], indent=1), json.dumps(run["placements"]), platform.tail(80)]
    )


def gang(platform: Platform, **spec: object) -> dict:
    return platform.submit(kind="training", entry="builtin:cnn", hosts=2, devices=2, **spec)


def test_a_run_on_three_hosts_is_refused_at_submit_on_a_two_host_stack(
    two_hosts: Platform,
) -> None:
    response = two_hosts.api(
        "POST",
        "runs/",
        json={"kind": "training", "device_type": "cpu", "entry": "builtin:cnn", "hosts": 3},
    )
    assert response.status_code == 400, response.text
    assert "needs 3 hosts × 1 cpu; 2 such hosts could ever take it" in response.json()["hosts"][0]


def last_step(platform: Platform, run_id: int, key: str) -> int:
    """The last step of the run's series ``key`` the platform has, -1 for none."""
    points = platform.api("GET", f"runs/{run_id}/metrics/", params={"key": key}).json()["points"]
    return points[-1][0] if points else -1


def test_two_hosts_by_two_processes_train_with_ddp_and_resume_after_a_killed_worker(
    two_hosts: Platform,
) -> None:
    platform = two_hosts
    # Killed past the checkpoint of step 49, with three times as many steps still to go.
    # The next checkpoint is 50 steps on: one stored between the look below and the kill
    # would start the resume past points of rank 3 its killed worker had not sent.
    run_id = gang(
        platform, max_steps=200, checkpoint_every_steps=50, max_restarts=2, metric_ranks=[3]
    )["id"]
    deadline = time.monotonic() + 300
    pause = pauses()
    while True:
        run = platform.run(run_id)
        stored = [c["step"] for c in run["checkpoints"] if c["status"] == "stored"]
        # A checkpoint at step 49 or later is stored, and rank 3's points up to it have
        # reached the platform: what the second host's worker has not sent when it is
        # killed goes only if its restarted worker sends it before the platform has ended
        # the attempt, and the resume starts after the checkpoint, so a step it held could
        # be missing.
        if (
            stored
            and max(stored) >= 49
            and last_step(platform, run_id, "loss@rank3") >= max(stored)
        ):
            break
        if run["status"] not in ("queued", "dispatched", "running"):
            pytest.fail(ended_early(platform, run))
        assert time.monotonic() < deadline, platform.tail()
        time.sleep(next(pause))
    placements = run["placements"]
    assert [(p["host"], p["ranks"], p["state"]) for p in placements] == [
        (HOSTS[0], [0, 1], "running"),
        (HOSTS[1], [2, 3], "running"),
    ]
    assert run["shape"] == "2 × 2 cpu"
    # The second host's worker dies and comes back: it kills what it left, its share is
    # lost, the first host is told to stop, and the run goes on as a new attempt.
    platform.kill_worker(HOSTS[1])
    start_worker(platform, HOSTS[1])
    deadline = time.monotonic() + 300
    pause = pauses()
    while True:
        run = platform.run(run_id)
        if run["attempt"] >= 2 and run["status"] == "running":
            break
        if run["status"] not in ("queued", "dispatched", "running"):
            pytest.fail(ended_early(platform, run))
        assert time.monotonic() < deadline, platform.tail()
        time.sleep(next(pause))
    first = run["attempts"][0]
    assert first["exit_cause"] == "worker_lost"
    assert first["exit_reason"].startswith(f"host {HOSTS[1]} (ranks 2-3) failed first")
    run = platform.wait(run_id, timeout=900)
    assert run["status"] == "succeeded", (run, platform.tail())
    assert run["attempts"][-1]["resumed_from_step"] is not None
    assert {p["state"] for p in run["placements"]} == {"succeeded"}
    losses = platform.api("GET", f"runs/{run_id}/metrics/", params={"key": "loss"}).json()
    steps = [step for step, _ in losses["points"]]
    assert steps == sorted(set(steps))
    assert steps[-1] == 199
    # metric_ranks: the second host's rank 3 logged its own series, through the resume too.
    ranked = platform.api("GET", f"runs/{run_id}/metrics/", params={"key": "loss@rank3"})
    assert [step for step, _ in ranked.json()["points"]] == steps
    # Each host's ranks' lines carry their rank.
    assert announced_ranks(platform, run_id) == {0, 1, 2, 3}


def announced_ranks(platform: Platform, run_id: int) -> set[int]:
    """The ranks whose "[rankN]: npulab: rank N of 4" line came with its rank."""
    found = set()
    page: str | None = f"runs/{run_id}/events/?type=log&limit=5000"
    while page:
        body = platform.api("GET", page).json()
        for event in body["results"]:
            line, rank = event["data"]["line"], event["data"].get("rank")
            if line.startswith(f"[rank{rank}]: npulab: rank {rank} of 4,"):
                found.add(rank)
        page = body["next"] and body["next"].split("/api/v1/", 1)[1]
    return found


def test_a_mindspore_run_on_two_hosts_trains_through_msrun_on_each(
    two_hosts: Platform, scripts_dir: Path
) -> None:
    require_mindspore()
    platform = two_hosts
    script = write_script(scripts_dir, "train_parallel.py", PARALLEL_SCRIPT.read_text())
    run_id = platform.submit(
        kind="training", framework="mindspore", entry=str(script), hosts=2, timeout_s=600
    )["id"]
    run = platform.wait(run_id, timeout=600)
    assert run["status"] == "succeeded", ended_early(platform, run)
    assert [(p["host"], p["ranks"], p["state"]) for p in run["placements"]] == [
        (HOSTS[0], [0, 0], "succeeded"),
        (HOSTS[1], [1, 1], "succeeded"),
    ]
    events = platform.api(
        "GET", f"runs/{run_id}/events/", params={"type": "log", "limit": 5000}
    ).json()["results"]
    lines = [(event["data"].get("node", 0), event["data"]["line"]) for event in events]
    # Each host's msrun started its own worker (the platform's placements give the node
    # ranks) against node rank 0's scheduler; the weights agree after allreduces across hosts.
    started = "msrun: 2 workers, 1 here (node rank 1), scheduler at 127.0.0.1:"
    assert any(node == 1 and line.startswith(started) for node, line in lines)
    weights = {node: line.split(": ", 1)[1] for node, line in lines if ": weights " in line}
    assert weights[0] == weights[1]
    last = "[rank1]: epoch: 2 step: 4, loss is "
    assert any(node == 1 and line.startswith(last) for node, line in lines)
    # The loss series is rank 0's alone.
    losses = platform.api("GET", f"runs/{run_id}/metrics/", params={"key": "loss"}).json()
    assert len(losses["points"]) == 8


# A parity script whose side A fails, wherever it runs.
SIDE_A_FAILS = """
from workers import parity

if parity.side() == "a":
    raise RuntimeError("side a refuses on this host")
"""


def test_a_parity_run_with_its_sides_on_two_hosts_compares_on_side_bs_and_names_both(
    two_hosts: Platform,
) -> None:
    pytest.importorskip("msprobe", reason="mindstudio-probe (the parity extra) is not installed")
    platform = two_hosts
    nowhere = platform.api(
        "POST",
        "runs/",
        json={"kind": "parity", "device_type": "cpu", "entry": "builtin:mlp", "b": {"host": "x"}},
    )
    assert nowhere.status_code == 400, nowhere.text
    assert "no host named 'x'" in nowhere.json()["b.host"][0]

    reference, candidate = HOSTS
    run_id = platform.submit(
        kind="parity",
        entry="builtin:mlp",
        layers=4,
        steps=2,
        a={"host": reference},
        b={"host": candidate, "dtype": "bfloat16"},
    )["id"]
    run = platform.wait(run_id, timeout=600)
    assert run["status"] == "succeeded", ended_early(platform, run)
    assert run["shape"] == "1 cpu + 1 cpu"
    placements = run["placements"]
    assert [(p["role"], p["host"], p["state"]) for p in placements] == [
        ("side b", candidate, "succeeded"),
        ("side a", reference, "succeeded"),
    ]
    # The comparison happened on side B's host, with both sides' dumps and curves.
    summary = run["result"]["summary"]
    assert (run["host"], summary["thresholds"]["dtype"]) == (candidate, "bfloat16")
    assert summary["layers"] > 0
    assert summary["broken_layers"] == 0
    assert summary["loss"]["steps"] == 2
    for side in ("a", "b"):
        curve = platform.api(
            "GET", f"runs/{run_id}/metrics/", params={"key": f"parity_loss/{side}"}
        ).json()
        assert [step for step, _ in curve["points"]] == [0, 1]
    handed = platform.api("GET", f"runs/{run_id}/artifacts/", params={"kind": "handoff"}).json()
    assert [a["name"] for a in handed["results"]] == ["parity-side-a.tar"]
    # Each side's host and stack: its placement's snapshot.
    sides = platform.api("GET", f"runs/{run_id}/parity/").json()["sides"]
    snapshots = {p["role"]: p["snapshot"] for p in placements}
    for side, host in (("a", reference), ("b", candidate)):
        assert sides[side]["host"] == host
        assert sides[side]["snapshot"] == snapshots[f"side {side}"] is not None
        assert sides[side]["stack"]["torch"]
    assert run["snapshot"] == snapshots["side b"]


def test_a_side_that_fails_on_its_host_fails_the_run_naming_that_host(
    two_hosts: Platform, scripts_dir
) -> None:
    pytest.importorskip("msprobe", reason="mindstudio-probe (the parity extra) is not installed")
    platform = two_hosts
    script = write_script(scripts_dir, "parity_side_a_fails.py", SIDE_A_FAILS)
    reference, candidate = HOSTS
    run_id = platform.submit(
        kind="parity", entry=str(script), a={"host": reference}, b={"host": candidate}
    )["id"]
    run = platform.wait(run_id, timeout=300)
    assert run["status"] == "failed", ended_early(platform, run)
    assert run["exit_cause"] == "parity_side_failed", ended_early(platform, run)
    assert run["exit_reason"] == (
        f"host {reference} (side a): side a failed: RuntimeError: side a refuses on this host"
    )
    states = {p["role"]: p["state"] for p in run["placements"]}
    assert states["side a"] == "failed"
