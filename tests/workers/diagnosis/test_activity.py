"""A silent run's devices: busy, idle, or not known (workers.diagnosis.activity)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.waiting import wait_until
from workers import telemetry
from workers.contract import telemetry as contract
from workers.contract.devices import CPU, NPU
from workers.diagnosis import activity
from workers.diagnosis.watch import BUSY, RunWatch


@pytest.fixture
def npu_reads() -> Iterator[dict[int, float | None]]:
    """An NPU host whose telemetry reports the AICore utilisation set in the dict."""
    readings: dict[int, float | None] = {}
    before = telemetry.SAMPLERS.get(NPU)

    def sampler(when: float, indices: list[int] | None) -> list[dict]:
        return [
            contract.sample(when, index, readings={"utilization_pct": readings[index]})
            if readings.get(index) is not None
            else contract.sample(when, index, error="npu-smi: no such chip")
            for index in indices or sorted(readings)
        ]

    telemetry.register(NPU, sampler)
    yield readings
    if before is not None:
        telemetry.register(NPU, before)


def test_an_npu_is_busy_when_any_of_the_runs_chips_computes(npu_reads) -> None:
    watched = activity.of(NPU, [2, 3], lambda: ())
    npu_reads.update({2: 0.0, 3: 64.0})
    assert watched.busy() is True
    assert watched.last_pct == 64.0
    npu_reads.update({3: 1.0})
    assert watched.busy() is False


def test_an_npu_whose_telemetry_fails_tells_nothing(npu_reads) -> None:
    npu_reads.update({0: None})
    assert activity.of(NPU, [0], lambda: ()).busy() is None


def test_a_device_type_without_a_reader_tells_nothing() -> None:
    assert activity.of("tpu", [0], lambda: ()).busy() is None


def test_the_cpu_counts_only_the_runs_own_processes() -> None:
    spinning = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    sleeping = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )
    try:
        busy = activity.of(CPU, [0], lambda: [spinning.pid])
        idle = activity.of(CPU, [0], lambda: [sleeping.pid])
        assert busy.busy() is None  # nothing to compare with yet
        # The spinning process's CPU time grows between two looks, the sleeping one's not
        # (whatever else this machine runs).
        wait_until(lambda: busy.busy(), "the spinning process to count as busy", timeout=60)
        idle.look()
        wait_until(lambda: idle.busy() is False, "the sleeping one to count as idle", 60, 0.5)
        assert idle.last_pct is not None
        assert idle.last_pct < activity.BUSY_PCT
    finally:
        for process in (spinning, sleeping):
            os.killpg(process.pid, 9)
            process.wait()


class _Counted(activity.Activity):
    """Devices that always compute, counting the looks taken at them."""

    def __init__(self) -> None:
        super().__init__([0], lambda: ())
        self.looks = 0

    def look(self) -> None:
        self.looks += 1

    def busy(self) -> bool:
        self.last_pct = 80.0
        return True


def test_the_devices_are_looked_at_only_near_the_hang_deadline(tmp_path) -> None:
    # A look on a CPU host reads all of /proc: none while the deadline is far away.
    now = [0.0]
    watch = RunWatch(
        {"hang_timeout_s": 60}, str(tmp_path), str(tmp_path / "events.jsonl"), clock=lambda: now[0]
    )
    counted = _Counted()
    watch.activity = counted
    for second in range(1, 55):
        now[0] = float(second)
        assert watch.poll() is None
    assert counted.looks == 0
    for second in range(55, 61):
        now[0] = float(second)
        assert watch.poll() is None
    assert counted.looks == 5  # 56 to 60 s: within LOOK_BEFORE_S of the deadline
    now[0] = 61.0
    assert watch.poll() == BUSY  # silent, but computing: the clock starts again
    assert watch.last_progress == 61.0
