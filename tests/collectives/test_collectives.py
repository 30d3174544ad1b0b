"""The collectives kind: nccl-tests' bus bandwidth, measured by real gloo ranks, on its page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_claim_run, do_finish_run, do_ingest_events, do_submit_run
from tests.paths import REPO_DIR
from workers.contract import kinds
from workers.contract.spec import SpecError
from workers.kinds.collectives.busbw import bandwidths, bus_factor, sizes

SPEC = {
    "kind": "collectives",
    "device_type": "cpu",
    "devices": 2,
    "min_bytes": 8,
    "max_bytes": 1024,
    "iters": 2,
    "warmup": 1,
}


def test_bus_bandwidth_follows_nccl_tests_definitions() -> None:
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("all_gather", 4) == pytest.approx(3 / 4)
    assert bus_factor("reduce_scatter", 2) == pytest.approx(1 / 2)
    assert bus_factor("all_to_all", 16) == pytest.approx(15 / 16)
    assert bus_factor("broadcast", 32) == 1.0
    assert bandwidths("all_reduce", 2_000_000_000, 1.0, 2) == pytest.approx((2.0, 2.0))
    assert sizes(8, 100) == [8, 16, 32, 64, 100]


def test_a_spec_names_known_collectives_and_an_order_of_sizes() -> None:
    with pytest.raises(SpecError) as refused:
        kinds.validate({**SPEC, "ops": ["all_reduce", "gossip"], "min_bytes": 4096})
    assert set(refused.value.errors) == {"ops", "min_bytes"}


def test_two_gloo_ranks_measure_every_collective(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "workers.run", str(spec), "--run-dir", str(run_dir)],
        cwd=REPO_DIR,
        env={**os.environ, "PYTHONPATH": str(REPO_DIR)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert done.returncode == 0, events[-5:]
    rows = [event for event in events if event["type"] == "busbw"]
    assert {row["op"] for row in rows} == {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "broadcast",
        "all_to_all",
    }
    assert {row["ranks"] for row in rows} == {2}
    for row in rows:
        assert row["busbw_gbps"] == pytest.approx(
            row["algbw_gbps"] * bus_factor(row["op"], 2), rel=1e-9
        )
    result = events[-1]
    assert result["status"] == "succeeded"
    assert result["summary"]["backend"] == "gloo"
    assert result["summary"]["all_reduce_busbw_peak_gbps"] > 0
    # The curve: each row is also a metric point at its size.
    assert any(e["type"] == "metric" and e["key"] == "busbw_gbps/all_reduce" for e in events)


@pytest.mark.django_db
def test_the_run_page_shows_the_bandwidth_table(owner, cpu_host, client) -> None:
    run = do_submit_run(owner, {**SPEC, "devices": 1})
    place_queued_runs()
    do_claim_run(cpu_host, run.pk, 1)
    row = {"op": "all_reduce", "ranks": 1, "time_us": 10.0, "algbw_gbps": 0.8}
    events = [
        {"type": "busbw", "time": 1.0, "bytes": 1024, "busbw_gbps": 0.5, **row},
        {
            "type": "result",
            "time": 2.0,
            "status": "succeeded",
            "reason": "peak",
            "summary": {"all_reduce_busbw_peak_gbps": 0.5},
        },
    ]
    do_ingest_events(cpu_host, run.pk, 1, 0, 100, events)
    do_finish_run(cpu_host, run.pk, 1, {"exit_code": 0})
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="busbw"' in page
    assert 'data-bytes="1024"' in page
    assert "0.500" in page
