"""What restarts through the whole platform: a job error does not, a lost run does."""

from __future__ import annotations

import pytest

from harness.stack import HOST, Platform
from tests.e2e.screenshots import shoot

pytestmark = pytest.mark.e2e


def training(platform: Platform, **spec) -> dict:
    return platform.submit(kind="training", max_restarts=3, **spec)


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("mymodel.train:main", "ModuleNotFoundError: No module named 'mymodel'"),
        (
            "missing.py",
            "FileNotFoundError: [Errno 2] No such file or directory: '{run_dir}/missing.py'",
        ),
    ],
)
def test_a_job_error_ends_the_run_after_one_attempt(
    platform: Platform, entry: str, reason: str
) -> None:
    run = platform.wait(training(platform, entry=entry)["id"])
    reason = reason.format(run_dir=platform.run_dir(run["id"]))
    assert (run["status"], run["exit_cause"], run["exit_reason"]) == ("failed", "job_error", reason)
    assert (run["restarts"], run["infrastructure_failure"]) == (0, False)
    assert [(a["number"], a["exit_cause"]) for a in run["attempts"]] == [(1, "job_error")]


def test_the_failure_banner_shows_the_exception(platform: Platform, browser) -> None:
    run = platform.wait(training(platform, entry="mymodel.train:main")["id"])
    page = browser.new_page()
    try:
        platform.log_in(page)
        page.goto(f"{platform.url}/runs/{run['id']}/")
        banner = page.locator("#exit-reason")
        banner.wait_for()
        assert banner.inner_text().startswith("Job error:")
        assert "ModuleNotFoundError: No module named 'mymodel'" in banner.inner_text()
        assert "exited with code" not in banner.inner_text()
        shoot(page, platform.var_dir, "job-error-banner")
    finally:
        page.close()


def test_a_run_whose_processes_died_is_restarted(platform: Platform) -> None:
    # Killed once its first checkpoint (step 49) is stored: some 250 steps before its end.
    run_id = training(platform, entry="builtin:cnn", max_steps=300, checkpoint_every_steps=50)["id"]
    platform.wait_for_stored_checkpoint(run_id, timeout=120)
    # What a crashed machine does to a run: every process of it is gone at once.
    platform.kill_run_processes(run_id)
    run = platform.wait(run_id, timeout=240)
    assert run["status"] == "succeeded", platform.tail()
    first, second = run["attempts"]
    assert first["host"] == HOST
    assert first["exit_cause"] not in ("job_error", "")
    assert first["status"] in ("failed", "lost")
    assert second["status"] == "succeeded"
    assert run["restarts"] == 1
