"""NPU telemetry through a fake ``npu-smi`` on PATH that prints the real captures."""

from __future__ import annotations

import logging
import time

import pytest

from tests.waiting import alive, wait_until
from tests.workers.telemetry.conftest import DOC, INFO, OTHER, FakeTool, dcmi_error, section
from workers import telemetry
from workers.contract import telemetry as contract
from workers.telemetry.npu import NpuSampler

MAPPING_9010 = (
    OTHER / "npu-smi-info-m_atlas-800-training-server_model-9010_version-24.1.RC2_mapping.txt"
)


def capture(prefix: str):
    return next(INFO.glob(f"{prefix}_*.txt"))


def valid(samples: list[dict]) -> list[dict]:
    return [contract.validate_sample(sample) for sample in samples]


def test_warning_cards_with_their_processes_and_the_host_last(npu_smi: FakeTool) -> None:
    npu_smi.answer('"info"', capture("24")).answer('"info -m"', MAPPING_9010)
    samples = valid(telemetry.sample("npu", [0, 3, 7]))
    assert [s["index"] for s in samples] == [0, 3, 7, None]
    assert [s["health"] for s in samples[:3]] == ["OK", "WARNING", "WARNING"]
    assert samples[1]["readings"]["temperature_c"] == 39.0
    assert samples[1]["readings"]["process_count"] == 4.0
    assert len(samples[2]["processes"]) == 4
    assert all(s["error"] == "" for s in samples)
    assert samples[3]["readings"]["memory_total_mb"] > 0
    assert "load_1m" in samples[3]["readings"]


def test_the_alarm_card(npu_smi: FakeTool) -> None:
    npu_smi.answer('"info"', capture("20"))
    sampler = NpuSampler(slow_every=1000)
    (sample,) = valid(sampler(time.time(), None))
    assert sample["index"] == 0
    assert sample["health"] == contract.HEALTH_ALARM
    assert sample["readings"]["temperature_c"] == 65.0
    assert sample["error"] == ""


@pytest.mark.parametrize("code", [0, 255])
def test_dcmi_error_in_a_container_gives_error_samples(npu_smi: FakeTool, code: int) -> None:
    npu_smi.answer('"info"', dcmi_error("-8005"), code=code)
    samples = valid(telemetry.sample("npu", [0, 1]))
    assert [s["index"] for s in samples] == [0, 1, None]
    for sample in samples[:2]:
        assert sample["readings"] == {}
        assert "dcmi module initialize failed. ret is -8005" in sample["error"]
        assert sample["error"].startswith("npu-smi info: ")
    # The host's own sample does not depend on npu-smi.
    assert samples[2]["error"] == ""
    assert samples[2]["readings"]
    # A failing table skips the per-chip queries, which would fail alike.
    assert npu_smi.calls() == ["info"]


def test_device_busy_error(npu_smi: FakeTool) -> None:
    npu_smi.answer('"info"', dcmi_error("-8020"), code=1)
    (sample,) = valid(NpuSampler()(time.time(), [2]))
    assert sample["index"] == 2
    assert "because the device is used. ret is -8020" in sample["error"]


def test_a_hanging_tool_times_out_with_its_children_killed(npu_smi: FakeTool) -> None:
    npu_smi.answer('"info"', hang=True)
    (sample,) = valid(NpuSampler(timeout_s=1)(time.time(), [0]))
    assert sample["error"] == "npu-smi info: timed out after 1 s"
    assert sample["readings"] == {}
    # The `sleep 600` the script started is gone with it.
    pid = int(npu_smi.hang_pid.read_text())
    wait_until(lambda: not alive(pid), f"the hanging child {pid} to be killed")


def test_npu_smi_missing_gives_error_samples(bin_dir, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(bin_dir))
    samples = telemetry.sample("npu", [0])
    assert samples[0]["error"].startswith("npu-smi info: cannot run npu-smi")
    assert samples[-1]["index"] is None


def test_a_device_the_table_lacks_is_named(npu_smi: FakeTool) -> None:
    npu_smi.answer('"info"', capture("16"))
    samples = valid(NpuSampler(slow_every=1000)(time.time(), [0, 5]))
    assert samples[0]["error"] == ""
    assert samples[1] == {**samples[1], "readings": {}, "error": "npu-smi info lists no chip 5"}


def test_slow_queries_go_round_the_chips_and_add_their_readings(npu_smi: FakeTool) -> None:
    npu_smi.answer('"info"', capture("24")).answer('"info -m"', MAPPING_9010)
    npu_smi.answer('"info -t usages -i "*', section(DOC, "npu-smi info -t usages -i 0 -c 0"))
    npu_smi.answer('"info -t ecc -i "*', section(DOC, "npu-smi info -t ecc -i 0 -c 0"))
    npu_smi.answer('"info -t health -i "*', section(DOC, "npu-smi info -t health -i 0 -c 0"))
    sampler = NpuSampler(slow_every=2, slow_chips=3)
    first = valid(sampler(time.time(), None))
    assert [s["index"] for s in first] == list(range(8))
    for sample in first[:3]:
        assert sample["readings"]["aicpu_pct"] == 9.0
        assert sample["readings"]["memory_bandwidth_pct"] == 1.0
        assert sample["readings"]["ecc_double_bit_errors"] == 0.0
    # The table's AICore reading stands; the usages' does not replace it.
    assert first[0]["readings"]["utilization_pct"] == 0.0
    assert all("aicpu_pct" not in s["readings"] for s in first[3:])
    second = valid(sampler(time.time(), None))
    assert all("aicpu_pct" not in s["readings"] for s in second)
    third = valid(sampler(time.time(), None))
    assert [s["index"] for s in third if "aicpu_pct" in s["readings"]] == [3, 4, 5]
    calls = npu_smi.calls()
    assert calls.count("info") == 3
    assert calls.count("info -m") == 1
    assert "info -t usages -i 3 -c 0" in calls
    # Health detail only for the Warning chip (NPU 3) among those turns.
    assert [c for c in calls if c.startswith("info -t health")] == ["info -t health -i 3 -c 0"]
    # The table has power, temperature and memory on this host: those are not asked.
    assert not [c for c in calls if c.split()[2:3] in (["power"], ["temp"], ["memory"])]


def test_what_the_table_lacks_is_asked_per_chip(npu_smi: FakeTool) -> None:
    # 310P prints power as NA; -t power is asked (this fake has no capture of it: it fails).
    npu_smi.answer('"info"', capture("10"))
    npu_smi.answer('"info -t usages -i "*', section(DOC, "npu-smi info -t usages -i 0 -c 0"))
    samples = valid(NpuSampler(slow_every=1, slow_chips=2)(time.time(), None))
    calls = npu_smi.calls()
    assert "info -t power -i 0 -c 0" in calls
    assert "info -t power -i 0 -c 1" in calls
    assert "info -t power -i 32 -c 0" not in calls
    assert samples[1]["readings"]["aicpu_pct"] == 9.0
    assert "power_w" not in samples[1]["readings"]


def test_a_warning_chip_logs_its_health_detail_once(npu_smi: FakeTool, caplog) -> None:
    npu_smi.answer('"info"', capture("24"))
    npu_smi.answer('"info -t health -i "*', section(DOC, "npu-smi info -t health -i 0 -c 0"))
    sampler = NpuSampler(slow_every=1, slow_chips=8)
    with caplog.at_level(logging.WARNING, logger="workers.telemetry"):
        sampler(time.time(), None)
        sampler(time.time(), None)
    lines = [r.getMessage() for r in caplog.records if "health" in r.getMessage()]
    assert len(lines) == 2  # NPU 3 and NPU 7, once each
    assert "NPU 3 chip 0 (device 3) health OK, error code NA: NA" in lines[0]


def test_a_hanging_detail_query_stops_the_round_and_keeps_the_table(npu_smi: FakeTool) -> None:
    npu_smi.answer('"info"', capture("24")).answer('"info -m"', MAPPING_9010)
    npu_smi.answer('"info -t usages -i "*', hang=True)
    samples = valid(NpuSampler(timeout_s=1, slow_every=1, slow_chips=8)(time.time(), None))
    assert [s["error"] for s in samples] == [""] * 8
    assert samples[0]["readings"]["power_w"] == 70.5
    # One timeout, then no more queries this round.
    assert [c for c in npu_smi.calls() if c.startswith("info -t")] == ["info -t usages -i 0 -c 0"]
