"""The real host worker (`python -m workers`) samples its CPU host and the platform stores it."""

from __future__ import annotations

import json

import pytest

from harness.stack import HOST, Platform
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

LATEST = (
    "import json; from npulab.telemetry.models import DeviceTelemetry as T; "
    "print(json.dumps([[t.device_index, t.time, t.readings, t.error] "
    f"for t in T.objects.filter(host__name={HOST!r})]))"
)


def latest(platform: Platform) -> dict[int | None, list]:
    rows = json.loads(platform.manage("shell", "-c", LATEST).splitlines()[-1])
    return {row[0]: row[1:] for row in rows}


# Each look is a Django start-up of a CPU-second: one a second, not four.
POLL_S = 1.0


def test_the_host_worker_sends_its_cpu_and_host_samples(platform: Platform) -> None:
    rows = wait_until(
        lambda: (found := latest(platform)).keys() == {0, None} and found,
        "the host worker's first telemetry samples",
        timeout=120,
        poll_s=POLL_S,
    )
    device, host = rows[0], rows[None]
    assert device[2] == host[2] == ""
    assert device[1]["memory_total_mb"] > 0
    assert "load_1m" in host[1]
    # The thread keeps sampling (every 2 s in the tests' stacks): a newer sample follows.
    wait_until(
        lambda: latest(platform)[None][0] > host[0],
        "a second round of samples",
        timeout=120,
        poll_s=POLL_S,
    )
