"""CPU and host telemetry, for real on this machine (with psutil and without)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from workers import telemetry
from workers.contract import telemetry as contract
from workers.telemetry import cpu


def busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def meminfo_total_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024.0
    raise AssertionError("no MemTotal")


def check_cpu_samples() -> None:
    telemetry.sample("cpu")  # the first round has no utilisation to compare with
    busy(0.2)
    samples = [contract.validate_sample(s) for s in telemetry.sample("cpu")]
    assert [s["index"] for s in samples] == [0, None]
    device, host = samples
    assert 0.0 <= device["readings"]["utilization_pct"] <= 100.0
    assert device["readings"]["memory_total_mb"] == pytest.approx(meminfo_total_mb(), rel=0.01)
    assert 0 < device["readings"]["memory_used_mb"] < device["readings"]["memory_total_mb"]
    assert host["readings"]["load_1m"] == pytest.approx(os.getloadavg()[0], abs=5.0)
    assert host["readings"]["memory_total_mb"] == device["readings"]["memory_total_mb"]
    assert device["error"] == host["error"] == ""


def test_cpu_with_psutil() -> None:
    assert cpu.psutil is not None
    check_cpu_samples()


def test_cpu_from_proc_without_psutil(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu, "psutil", None)
    monkeypatch.setattr(cpu, "_last_times", None)
    check_cpu_samples()


def test_every_host_type_gets_the_host_sample() -> None:
    for device_type in ("cpu", "cuda", "npu", "tpu"):
        samples = telemetry.sample(device_type, [0])
        assert samples[-1]["index"] is None
        assert "memory_total_mb" in samples[-1]["readings"]
    (tpu, _host) = telemetry.sample("tpu", [0])
    assert tpu["error"] == "no telemetry for device type 'tpu'"


def test_a_cpu_host_has_device_0_only() -> None:
    samples = telemetry.sample("cpu", [0, 1])
    assert samples[1]["error"] == "a CPU host has device 0 only, not 1"


def test_a_sampler_that_breaks_gives_error_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(when: float, indices: list[int] | None) -> list[dict]:
        raise RuntimeError("a bug")

    monkeypatch.setitem(telemetry.SAMPLERS, "npu", broken)
    samples = telemetry.sample("npu", [3])
    assert samples[0]["index"] == 3
    assert samples[0]["error"] == "telemetry failed: RuntimeError: a bug"
    assert samples[1]["index"] is None


def test_meminfo_of_an_old_kernel_without_memavailable() -> None:
    text = (
        "MemTotal:        2048000 kB\nMemFree:          512000 kB\n"
        "Buffers:               0 kB\nCached:           512000 kB\n"
    )
    assert cpu.parse_meminfo(text) == {"memory_used_mb": 1000.0, "memory_total_mb": 2000.0}
    assert cpu.parse_meminfo("") == {}


def test_the_hottest_cpu_thermal_zone(tmp_path: Path) -> None:
    # This machine has no thermal zones: a sysfs tree as the kernel lays it out.
    for name, kind, millidegrees in (
        ("thermal_zone0", "acpitz", "27800"),
        ("thermal_zone1", "x86_pkg_temp", "51000"),
        ("thermal_zone2", "iwlwifi_1", "60000"),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "type").write_text(kind + "\n")
        (tmp_path / name / "temp").write_text(millidegrees + "\n")
    assert cpu.thermal_zone_temperature(str(tmp_path)) == 51.0
    assert cpu.thermal_zone_temperature(str(tmp_path / "none")) is None
