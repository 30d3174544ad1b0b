"""A profiled run through the whole platform: the runner records the window, the host worker
uploads the trace, the control worker summarises and indexes it."""

from __future__ import annotations

import gzip
import time

import pytest

from harness.stack import Platform

pytestmark = pytest.mark.e2e


def test_a_smoke_run_with_a_profile_ends_with_a_ready_profile(platform: Platform) -> None:
    profile = {"wait": 1, "warmup": 1, "active": 2}
    submitted = platform.submit(matmul_size=128, train_steps=10, profile=profile)
    run = platform.wait(submitted["id"])
    assert run["status"] == "succeeded", platform.tail()
    # The run is finished once its trace is stored; the summary follows on the control worker.
    deadline = time.monotonic() + 120
    while True:
        listed = platform.api("GET", f"runs/{run['id']}/profiles/").json()["results"]
        if listed and listed[0]["status"] in ("ready", "failed"):
            break
        assert time.monotonic() < deadline, (listed, platform.tail())
        time.sleep(0.5)
    (found,) = listed
    assert (found["status"], found["source"], found["format"]) == (
        "ready",
        "captured",
        "kineto",
    ), found["error"]
    detail = platform.api("GET", f"profiles/{found['id']}/").json()
    assert detail["summary"]["steps"]
    assert detail["index"]["events"] > 0
    download = platform.api("GET", f"profiles/{found['id']}/download/")
    assert download.status_code == 200
    trace = gzip.decompress(download.content)
    assert b"ProfilerStep#2" in trace
