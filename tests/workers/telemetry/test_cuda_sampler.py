"""CUDA telemetry through a fake ``nvidia-smi`` on PATH.

No nvidia-smi output was captured for this project: the lines below are written
by hand in the format nvidia-smi documents for ``--query-gpu=... --format=csv,
noheader,nounits`` (``nvidia-smi --help-query-gpu``): one line per GPU, values
in the order asked, ", " between them, ``[N/A]`` / ``[Not Supported]`` where a
GPU has no value, throttle reasons as a hex bitmask; and for
``--query-compute-apps`` one line per process. The uuids and values are those of
an A100 80GB host as such a host prints them.
"""

from __future__ import annotations

import time

from tests.workers.telemetry.conftest import FakeTool
from workers import telemetry
from workers.contract import telemetry as contract
from workers.telemetry import cuda

UUID0 = "GPU-5f2e8d3c-1b7a-4c61-9e0d-2a9b3c4d5e6f"
UUID1 = "GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"
# index, uuid, temperature.gpu, power.draw, utilization.gpu, utilization.memory, memory.used,
# memory.total, clocks.sm, ecc corrected, ecc uncorrected, retired sbe, retired dbe, throttle
GPUS = (
    f"0, {UUID0}, 34, 71.23, 87, 41, 30521, 81920, 1410, 0, 0, 0, 0, 0x0000000000000000\n"
    f"1, {UUID1}, 61, [N/A], 0, 0, 4, 81920, 210, 3, 1, 2, 1, 0x0000000000000048\n"
)
APPS = f"{UUID0}, 4121, /opt/conda/bin/python3.10, 30496\n{UUID0}, 4188, my,job, [N/A]\n"
# A consumer card: no ECC.
CONSUMER = (
    "0, GPU-77aa1c2e-03f4-4b5a-8c6d-7e8f90a1b2c3, 45, 21.50, 3, 1, 812, 24576, 1920, "
    "[Not Supported], [Not Supported], 0x0000000000000000\n"
)


def test_gpus_with_processes_and_the_host_last(nvidia_smi: FakeTool) -> None:
    nvidia_smi.answer('"--query-gpu="*', GPUS).answer('"--query-compute-apps="*', APPS)
    samples = [contract.validate_sample(s) for s in telemetry.sample("cuda")]
    assert [s["index"] for s in samples] == [0, 1, None]
    first, second = samples[0], samples[1]
    assert first["readings"] == {
        "temperature_c": 34.0,
        "power_w": 71.23,
        "utilization_pct": 87.0,
        "memory_bandwidth_pct": 41.0,
        "memory_used_mb": 30521.0,
        "memory_total_mb": 81920.0,
        "clock_mhz": 1410.0,
        "ecc_single_bit_errors": 0.0,
        "ecc_double_bit_errors": 0.0,
        "retired_pages": 0.0,
        "throttle_reasons": 0.0,
        "process_count": 2.0,
    }
    assert first["processes"] == [
        {"pid": 4121, "name": "/opt/conda/bin/python3.10", "memory_mb": 30496.0},
        {"pid": 4188, "name": "my,job", "memory_mb": None},
    ]
    assert first["health"] == contract.HEALTH_UNKNOWN
    assert "power_w" not in second["readings"]
    assert second["readings"]["retired_pages"] == 3.0
    assert second["readings"]["throttle_reasons"] == float(0x48)
    # An uncorrected ECC error and a hardware thermal slowdown: worth a look.
    assert second["health"] == contract.HEALTH_WARNING
    assert second["readings"]["process_count"] == 0.0
    calls = nvidia_smi.calls()
    assert calls[0].endswith("--format=csv,noheader,nounits")
    assert calls[0].startswith("--query-gpu=index,uuid,temperature.gpu,power.draw,")


def test_a_field_the_driver_does_not_know_is_dropped(nvidia_smi: FakeTool) -> None:
    refusal = 'Field "retired_pages.single_bit_ecc.count" is not a valid field to query.\n'
    nvidia_smi.answer('"--query-gpu="*retired_pages.single*', refusal, code=2)
    nvidia_smi.answer(
        '"--query-gpu="*retired_pages.double*',
        refusal.replace("single_bit_ecc", "double_bit"),
        code=2,
    )
    nvidia_smi.answer('"--query-gpu="*', CONSUMER).answer('"--query-compute-apps="*', "")
    sampler = cuda.CudaSampler()
    (sample,) = [contract.validate_sample(s) for s in sampler(time.time(), None)]
    assert not [field for field in sampler.fields if field.startswith("retired_pages")]
    assert sample["readings"]["clock_mhz"] == 1920.0
    assert "ecc_single_bit_errors" not in sample["readings"]  # [Not Supported]
    assert sample["readings"]["process_count"] == 0.0
    sampler(time.time(), None)
    # Learned once: the second round asks the shorter query straight away.
    assert len(nvidia_smi.calls()) == 3 + 1 + 2


def test_a_failing_nvidia_smi_gives_error_samples(nvidia_smi: FakeTool) -> None:
    nvidia_smi.answer(
        '"--query-gpu="*',
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n",
        code=9,
    )
    samples = telemetry.sample("cuda", [0, 1])
    assert [s["index"] for s in samples] == [0, 1, None]
    assert samples[0]["readings"] == {}
    assert samples[0]["error"].startswith(
        "nvidia-smi --query-gpu: exited with 9: NVIDIA-SMI has failed"
    )


def test_a_hanging_nvidia_smi_times_out(nvidia_smi: FakeTool) -> None:
    nvidia_smi.answer('"--query-gpu="*', hang=True)
    (sample,) = cuda.CudaSampler(timeout_s=1)(time.time(), [0])
    assert sample["error"] == "nvidia-smi --query-gpu: timed out after 1 s"


def test_na_and_not_supported_are_absent() -> None:
    assert [
        cuda.value_of(v) for v in ("[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "")
    ] == [None] * 5
    assert cuda.value_of("0x0000000000000004") == 4.0
    assert cuda.value_of(" 71.23 ") == 71.23
