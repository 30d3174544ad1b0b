"""The stability runner by hand: ``python -m workers.run`` on the CPU, a second of load each."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workers.test_run_cli import by_type, run
from workers.kinds.stability import FAULTS_ENV

# Four quarter-second intervals of a small matmul: the first two are the throughput's
# baseline. The load runs flat out for the whole duration: a longer one only costs CPU.
SHORT = {
    "kind": "stability",
    "device_type": "cpu",
    "duration_s": 1,
    "interval_s": 0.25,
    "size": 96,
    "timeout_s": 300,
    # This machine is shared: only an injected slowdown may move the verdict.
    "warn_drop_pct": 99,
    "fail_drop_pct": 100,
}


def result_of(events: list[dict]) -> dict:
    results = by_type(events, "result")
    assert len(results) == 1
    assert events[-1] is results[0]
    return results[0]


def test_a_short_run_on_the_cpu_passes_with_an_interval_event_per_interval(tmp_path: Path) -> None:
    code, stderr, events = run(SHORT, tmp_path / "run")
    assert code == 0, stderr
    intervals = by_type(events, "interval")
    assert [event["interval"] for event in intervals] == [1, 2, 3, 4]
    for event in intervals:
        assert event["device"] == 0
        assert event["consistency"] == "match"
        assert event["unit"] == "TFLOP/s"
        assert event["throughput"] > 0
        assert event["iterations"] > 0
        assert isinstance(event["telemetry"], dict)
    result = result_of(events)
    assert result["status"] == "succeeded"
    summary = result["summary"]
    assert summary["verdict"] == "pass"
    assert summary["reasons"] == []
    assert summary["bad_devices"] == []
    assert summary["mismatches"] == 0
    assert summary["intervals"] == summary["planned_intervals"] == 4
    assert summary["throughput"] > 0


def test_an_injected_mismatch_fails_the_run_naming_the_device_and_the_interval(
    tmp_path: Path,
) -> None:
    faults = {FAULTS_ENV: "mismatch:interval=3,device=0"}
    code, _, events = run(SHORT, tmp_path / "run", **faults)
    assert code == 1
    outcomes = [(e["interval"], e["consistency"]) for e in by_type(events, "interval")]
    # The run stops at the mismatch: more load adds nothing to a fail.
    assert outcomes == [(1, "match"), (2, "match"), (3, "mismatch")]
    result = result_of(events)
    assert result["status"] == "failed"
    assert result["cause"] == "consistency_mismatch"
    assert "device 0 at interval 3" in result["reason"]
    assert "silent data corruption" in result["reason"]
    summary = result["summary"]
    assert summary["verdict"] == "fail"
    assert summary["mismatches"] == 1
    assert [bad["device"] for bad in summary["bad_devices"]] == [0]


@pytest.mark.parametrize(
    ("thresholds", "verdict", "status"),
    [
        ({"warn_drop_pct": 50, "fail_drop_pct": 100}, "warn", "succeeded"),
        ({"warn_drop_pct": 20, "fail_drop_pct": 50}, "fail", "failed"),
    ],
)
def test_an_injected_throughput_decay_gives_the_verdict_its_thresholds_say(
    tmp_path: Path, thresholds: dict, verdict: str, status: str
) -> None:
    # From interval 3 the device really works at a tenth of its speed: a ~90 % drop.
    spec = dict(SHORT, **thresholds)
    code, stderr, events = run(spec, tmp_path / "run", **{FAULTS_ENV: "decay:from=3,factor=0.1"})
    result = result_of(events)
    assert result["status"] == status, stderr
    assert code == (0 if status == "succeeded" else 1)
    summary = result["summary"]
    assert summary["verdict"] == verdict
    assert summary["worst_drop_pct"] > 50
    assert any("throughput of device 0 dropped" in reason for reason in summary["reasons"])
    speeds = [e["throughput"] for e in by_type(events, "interval")]
    assert len(speeds) == 4
    assert max(speeds[2:]) < min(speeds[:2])
    if verdict == "fail":
        assert result["cause"] == "throughput_drop"
        assert [bad["device"] for bad in summary["bad_devices"]] == [0]
    else:
        assert result["reason"].startswith("warn: ")
        assert summary["bad_devices"] == []


def test_faults_in_the_spec_are_injected_and_named_in_the_summary(tmp_path: Path) -> None:
    spec = dict(SHORT, faults="mismatch:interval=2,device=0")
    code, _, events = run(spec, tmp_path / "run")
    assert code == 1
    result = result_of(events)
    assert "device 0 at interval 2" in result["reason"]
    assert result["summary"]["injected_faults"] == "mismatch:interval=2,device=0"


def test_an_injected_device_error_fails_the_run_naming_the_device(tmp_path: Path) -> None:
    code, _, events = run(SHORT, tmp_path / "run", **{FAULTS_ENV: "error:interval=2,device=0"})
    assert code == 1
    last = by_type(events, "interval")[-1]
    assert (last["interval"], last["consistency"]) == (2, "error")
    assert "injected device error" in last["error"]
    result = result_of(events)
    assert result["cause"] == "device_fault"
    assert result["reason"].startswith("device 0 failed at interval 2")


def test_a_process_that_dies_is_reported_by_the_supervisor(tmp_path: Path) -> None:
    code, _, events = run(SHORT, tmp_path / "run", **{FAULTS_ENV: "die:interval=2"})
    assert code == 1
    assert [e["interval"] for e in by_type(events, "interval")] == [1]
    result = result_of(events)
    assert result["cause"] == "process_exit"
    assert "SIGKILL" in result["reason"]


def test_a_faults_variable_that_does_not_parse_fails_before_any_load(tmp_path: Path) -> None:
    code, _, events = run(SHORT, tmp_path / "run", **{FAULTS_ENV: "mismatch:when=3"})
    assert code == 1
    assert by_type(events, "interval") == []
    result = result_of(events)
    assert result["cause"] == "job_error"
    assert FAULTS_ENV in result["reason"]
    assert "interval=" in result["reason"]


def test_the_mixed_workload_reports_training_steps_per_second(tmp_path: Path) -> None:
    spec = dict(SHORT, workload="mixed", size=32, duration_s=0.5)
    code, stderr, events = run(spec, tmp_path / "run")
    assert code == 0, stderr
    intervals = by_type(events, "interval")
    assert [e["unit"] for e in intervals] == ["steps/s", "steps/s"]
    assert all(e["consistency"] == "match" for e in intervals)


def test_a_user_entry_is_called_each_iteration(tmp_path: Path) -> None:
    module = tmp_path / "my_load.py"
    module.write_text(
        "import torch\n"
        "def step(device, dtype):\n"
        "    a = torch.ones(32, 32, dtype=dtype, device=device)\n"
        "    (a @ a).sum()\n"
        "    return 2.0 * 32 ** 3\n"
    )
    # The child runs in the run directory with the spec's env: the module is on its path.
    spec = dict(SHORT, workload="my_load:step", duration_s=0.5, env={"PYTHONPATH": str(tmp_path)})
    code, stderr, events = run(spec, tmp_path / "run")
    assert code == 0, stderr
    intervals = by_type(events, "interval")
    assert len(intervals) == 2
    assert all(e["unit"] == "TFLOP/s" and e["iterations"] > 0 for e in intervals)


def test_a_user_entry_that_does_not_import_is_the_users_error(tmp_path: Path) -> None:
    code, _, events = run(dict(SHORT, workload="no_such_module:step"), tmp_path / "run")
    assert code == 1
    result = result_of(events)
    assert result["cause"] == "job_error"
    assert "cannot import no_such_module" in result["reason"]
