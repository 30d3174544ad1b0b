"""A failed run's diagnosis through the whole platform: host, runner, API, bundle."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from harness.stack import Platform
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e
SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "diagnosis" / "oom_script.py"


def _bundle(platform: Platform, run_id: int) -> dict[str, bytes]:
    response = platform.api("GET", f"runs/{run_id}/bundle/")
    assert response.status_code == 200, response.text
    with tarfile.open(fileobj=io.BytesIO(response.content), mode="r:gz") as archive:
        return {info.name: archive.extractfile(info).read() for info in archive if info.isfile()}


def test_a_failed_run_names_its_root_cause_and_its_bundle_holds_the_collected_logs(
    platform: Platform,
) -> None:
    run_id = platform.submit(kind="training", entry=str(SCRIPT), max_restarts=2)["id"]
    run = platform.wait(run_id)
    assert run["status"] == "failed", platform.tail()
    diagnosis = run["diagnosis"]
    assert (diagnosis["category"], diagnosis["blame"]) == ("oom", "user-code")
    assert diagnosis["evidence"][0]["text"].startswith("RuntimeError: NPU out of memory")
    # The user's code is not retried, whatever max_restarts says.
    assert run["restarts"] == 0
    prefix = f"npulab-run-{run_id}/"
    members = wait_until(
        lambda: (
            (found := _bundle(platform, run_id))
            and prefix + "collected/attempt-1.tar.gz" in found
            and found
        ),
        "the collected logs in the bundle",
        timeout=60,
    )
    assert json.loads(members[prefix + "diagnosis.json"])["diagnosis"]["category"] == "oom"
    assert b"NPU out of memory" in members[prefix + "logs/run.log"]
