"""The installed ``npulab`` CLI against the whole platform: every exit code a pipeline gates on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from junitparser import JUnitXml

from harness.polling import pauses
from harness.stack import HOST, Platform, free_port
from tests.e2e.conftest import write_script
from workers.contract import exits

pytestmark = pytest.mark.e2e
TINY = ["--matmul-size", "16", "--train-steps", "2"]
# Trains until stopped: what a run looks like while a host dies or a user cancels it.
LONG = ["--matmul-size", "256", "--train-steps", "100000"]
SMOKE = ["submit", "--kind", "smoke", "--device-type", "cpu"]


def npulab_path() -> str:
    beside = Path(sys.executable).parent / "npulab"
    found = str(beside) if beside.exists() else shutil.which("npulab")
    if not found:
        pytest.fail("the npulab console script is not installed: pip install -e .")
    return found


def cli_env(platform: Platform, tmp_path: Path, **override: str) -> dict[str, str]:
    token = platform.session.headers["Authorization"].split()[1]
    env = dict(os.environ, NPULAB_URL=platform.url, NPULAB_TOKEN=token)
    # No config file of the machine's own may stand in for what a test leaves out.
    env["NPULAB_CONFIG"] = str(tmp_path / "no-config.json")
    env.update(override)
    return env


def npulab(
    platform: Platform, tmp_path: Path, *args: str, timeout: float = 240, **env: str
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [npulab_path(), *args],
        env=cli_env(platform, tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class Background:
    """``npulab`` running on its own (a CI job waiting), its output in files."""

    def __init__(self, platform: Platform, tmp_path: Path, *args: str) -> None:
        self.out = tmp_path / f"cli-{uuid.uuid4().hex[:8]}.out"
        self.err = self.out.with_suffix(".err")
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.process = subprocess.Popen(
                [npulab_path(), *args],
                env=cli_env(platform, tmp_path),
                stdout=out,
                stderr=err,
                text=True,
            )

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"npulab still running:\n{self.output()}") from None

    def output(self) -> str:
        return self.out.read_text() + "\n--- stderr\n" + self.err.read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def run_named(platform: Platform, name: str, timeout: float = 60) -> dict[str, Any]:
    """The run a background CLI submitted, found by its unique name."""
    deadline = time.monotonic() + timeout
    pause = pauses()
    while True:
        listed = platform.api("GET", "runs/", params={"limit": 20}).json()["results"]
        found = [run for run in listed if run["name"] == name]
        if found:
            return found[0]
        assert time.monotonic() < deadline, f"no run named {name}\n{platform.tail()}"
        time.sleep(next(pause))


def wait_for_child(platform: Platform, run_id: int, timeout: float = 90) -> None:
    """Until the run's process trains on the host: killing the worker now loses it."""
    platform.wait(run_id, {"running"}, timeout=timeout)
    child_pid = platform.run_dir(run_id) / "child.pid"
    deadline = time.monotonic() + timeout
    while not child_pid.exists():
        assert time.monotonic() < deadline, f"run {run_id} started no child\n{platform.tail()}"
        time.sleep(0.1)


def test_a_smoke_run_that_succeeds_exits_0_with_a_junit_report(
    platform: Platform, tmp_path: Path
) -> None:
    report = tmp_path / "smoke.xml"
    done = npulab(platform, tmp_path, *SMOKE, *TINY, "--wait", "--junit", str(report))

    assert done.returncode == exits.CLI_SUCCEEDED, done.stdout + done.stderr
    url, *rest = done.stdout.splitlines()
    run_id = int(url.rstrip("/").rsplit("/", 1)[1])
    assert url == f"{platform.url}/runs/{run_id}/"
    assert rest[-1].startswith(f"run {run_id} succeeded (completed) in ")
    (suite,) = list(JUnitXml.fromfile(str(report)))
    assert [case.name for case in suite] == ["device", "matmul", "train", "result"]
    assert (suite.failures, suite.errors) == (0, 0)

    # A second run to compare with: scripts read --json.
    second = npulab(platform, tmp_path, *SMOKE, *TINY, "--wait", "--json")
    assert second.returncode == exits.CLI_SUCCEEDED, second.stderr
    body = json.loads(second.stdout)
    assert (body["outcome"], body["run"]["host"]) == ("succeeded", HOST)
    compared = npulab(
        platform,
        tmp_path,
        "compare",
        str(run_id),
        str(body["run"]["id"]),
        "--threshold",
        "10",
        "--fail-on",
        "regressions",
    )
    assert compared.returncode == exits.CLI_SUCCEEDED, compared.stdout + compared.stderr
    assert "0 regressions" in compared.stdout


def test_a_training_run_whose_script_fails_exits_1(
    platform: Platform, tmp_path: Path, scripts_dir: Path
) -> None:
    script = write_script(
        scripts_dir, "cli_fails.py", "import sys\nprint('about to fail', flush=True)\nsys.exit(3)\n"
    )
    done = npulab(
        platform,
        tmp_path,
        "submit",
        "--kind",
        "training",
        "--device-type",
        "cpu",
        "--entry",
        str(script),
        "--max-restarts",
        "0",
        "--wait",
    )
    assert done.returncode == exits.CLI_JOB_FAILED, done.stdout + done.stderr + platform.tail()
    assert "failed (process_exit)" in done.stdout


def test_an_invalid_spec_exits_2_naming_the_field(platform: Platform, tmp_path: Path) -> None:
    done = npulab(platform, tmp_path, *SMOKE, "--devices", "0", "--wait")
    assert done.returncode == exits.CLI_USAGE
    assert "devices: must be at least 1" in done.stderr
    assert done.stdout == ""


def test_a_run_lost_with_its_host_worker_exits_3(platform: Platform, tmp_path: Path) -> None:
    name = f"cli-lost-{uuid.uuid4().hex[:8]}"
    waiting = Background(platform, tmp_path, *SMOKE, *LONG, "--name", name, "--wait")
    try:
        run_id = run_named(platform, name)["id"]
        wait_for_child(platform, run_id)
        # As tests/e2e/test_runs_e2e.py does: the restarted worker kills what it left.
        platform.kill_worker()
        platform.start_worker()
        code = waiting.wait(timeout=120)
        assert code == exits.CLI_INFRASTRUCTURE, waiting.output() + platform.tail()
        assert "an infrastructure failure, safe to retry" in waiting.output()
        assert platform.run(run_id)["status"] == "lost"
    finally:
        waiting.stop()
    # The host takes new work again, for the tests after this one.
    deadline = time.monotonic() + 60
    pause = pauses()
    while platform.api("GET", f"hosts/{HOST}/").json()["status"] != "online":
        assert time.monotonic() < deadline, platform.tail()
        time.sleep(next(pause))


def test_waiting_less_than_the_run_takes_exits_4_and_leaves_it_running(
    platform: Platform, tmp_path: Path
) -> None:
    done = npulab(platform, tmp_path, *SMOKE, *LONG, "--wait", "--timeout", "3", "--json")
    body = json.loads(done.stdout)
    run_id = body["run"]["id"]
    try:
        assert done.returncode == exits.CLI_GAVE_UP, done.stderr
        assert body["outcome"] == "gave_up"
        assert platform.run(run_id)["status"] in ("queued", "dispatched", "running")
    finally:
        cancelled = npulab(platform, tmp_path, "runs", "cancel", str(run_id))
        assert cancelled.returncode == exits.CLI_SUCCEEDED, cancelled.stderr
        assert platform.wait(run_id, timeout=60)["status"] == "cancelled"


def test_a_run_cancelled_while_the_cli_waits_exits_5(platform: Platform, tmp_path: Path) -> None:
    name = f"cli-cancel-{uuid.uuid4().hex[:8]}"
    waiting = Background(platform, tmp_path, *SMOKE, *LONG, "--name", name, "--wait", "--follow")
    try:
        run_id = run_named(platform, name)["id"]
        wait_for_child(platform, run_id)
        cancelled = npulab(platform, tmp_path, "runs", "cancel", str(run_id))
        assert cancelled.returncode == exits.CLI_SUCCEEDED, cancelled.stderr
        assert waiting.wait(timeout=90) == exits.CLI_CANCELLED, waiting.output()
        # --follow printed the run's log as it came: the worker's line, the runner's.
        printed = waiting.out.read_text()
        assert "environment snapshot" in printed
        assert "npulab runner" in printed
    finally:
        waiting.stop()
    assert platform.wait(run_id, timeout=60)["status"] == "cancelled"


def test_a_wrong_token_or_an_unreachable_platform_exits_6(
    platform: Platform, tmp_path: Path
) -> None:
    refused = npulab(platform, tmp_path, "runs", "list", NPULAB_TOKEN="npl_wrong")
    assert refused.returncode == exits.CLI_UNREACHABLE
    assert "not authorised" in refused.stderr
    nowhere = f"http://127.0.0.1:{free_port()}"
    unreachable = npulab(platform, tmp_path, *SMOKE, *TINY, "--wait", NPULAB_URL=nowhere)
    assert unreachable.returncode == exits.CLI_UNREACHABLE
    assert f"could not reach the platform at {nowhere}" in unreachable.stderr
