"""The upgrade review in headless Chromium: numbers on both sides after a package change on the
same stack, a job error kept apart, an unknown planned version."""

from __future__ import annotations

import json
import statistics

import pytest
import requests

from harness.stack import HOST, Platform
from tests.e2e.screenshots import shoot

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

SCREENSHOTS = "review-{}"
EXTRA_PACKAGE = "npulab-review-demo"

# A staging host on another torch, with three smoke runs and a user's job error, as the
# platform would hold them after those runs (no second host worker is needed for that).
STAGING = """
import json
from django.utils import timezone
from npulab.hosts.models import Host
from npulab.projects.models import default_project
from npulab.runs.models import Run
from npulab.snapshots.models import Snapshot
from npulab.snapshots.services import do_record_snapshot
from workers.contract.kinds import validate

document = Snapshot.objects.get(pk={current}).data
document["python"]["key"]["torch"] = "9.9.0"
document["python"]["packages"]["torch"] = "9.9.0"
target = do_record_snapshot(Host.objects.create(name="staging-e2e"), document).snapshot
spec = validate({{"kind": "smoke", "device_type": "cpu"}})

def ended(status, cause, summary, reason=""):
    return Run.objects.create(
        kind="smoke", spec=spec, device_type="cpu", status=status, snapshot=target,
        project=default_project(),
        finished_at=timezone.now(), exit_cause=cause, exit_reason=reason,
        result={{"status": status, "summary": summary}},
    )

for gflops in {target_gflops}:
    ended("succeeded", "completed", {{"matmul_gflops": gflops, "steps_per_s": 40.0}})
job = ended("failed", "job_error", {{}}, "FileNotFoundError: [Errno 2] No such file: 'train.py'")
print(json.dumps({{"target": target.pk, "job_error": job.pk}}))
"""


def upload_snapshot(platform: Platform, document: dict) -> dict:
    """Send a snapshot as the host worker would after a `pip install`."""
    token = (platform.var_dir / f"{HOST}.token").read_text().strip()
    upload = requests.post(
        f"{platform.url}/api/v1/agent/snapshots/",
        json={"snapshot": document},
        headers={"Authorization": f"Token {token}"},
        timeout=30,
    )
    assert upload.status_code == 201, upload.text
    return upload.json()


def test_the_review_shows_numbers_job_errors_and_unknown_versions(
    platform: Platform, browser
) -> None:
    # Two real smoke runs under the host's environment as it is.
    runs = [platform.submit(matmul_size=256, train_steps=20, name=f"review {n}") for n in (1, 2)]
    done = [platform.wait(run["id"]) for run in runs]
    assert [run["status"] for run in done] == ["succeeded", "succeeded"], done
    assert done[0]["snapshot"] is not None
    before = platform.api("GET", f"snapshots/{done[0]['snapshot']}/").json()
    gflops = statistics.median(run["result"]["summary"]["matmul_gflops"] for run in done)

    # Then a `pip install`: a new snapshot with the same stack becomes the current one.
    document = before["data"]
    document["python"]["packages"][EXTRA_PACKAGE] = "1.0.0"
    assert "+1 packages" in upload_snapshot(platform, document)["change"]

    output = platform.manage(
        "shell",
        "--no-imports",
        "-c",
        STAGING.format(
            current=before["id"], target_gflops=[round(gflops * f, 3) for f in (0.98, 1.0, 1.02)]
        ),
    )
    made = json.loads(output.splitlines()[-1])

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    platform.log_in(page)
    page.goto(f"{platform.url}/hosts/{HOST}/upgrade-review/")
    intro = page.locator("#review-intro").inner_text()
    assert "same stack" in intro
    assert "listed apart" in intro
    page.select_option("select[name=target]", str(made["target"]))
    page.click("form:has(select[name=target]) button")
    page.wait_for_selector("#decision")

    # The REST answer to the same question: the page must say what it says.
    answer = platform.api(
        "GET", f"hosts/{HOST}/upgrade-review/", params={"target": made["target"]}
    ).json()
    numbers = next(n for n in answer["numbers"]["smoke"] if n["key"] == "matmul_gflops")
    # The runs from before the package change count for the current environment (with
    # any other smoke run this session's host made under the same stack).
    current_n = numbers["current"]["n"]
    assert current_n >= 2
    assert numbers["target"]["n"] == 3
    row = page.locator('#numbers tr[data-kind="smoke"][data-key="matmul_gflops"]')
    assert f"n={current_n}" in row.locator('[data-side="current"]').inner_text()
    assert "n=3" in row.locator('[data-side="target"]').inner_text()
    assert ("fewer than 3 runs" in row.inner_text()) == numbers["few_runs"]
    assert "snapshots on e2e-cpu" in page.locator("#evidence-current").inner_text()
    assert EXTRA_PACKAGE in page.locator("#package-differences").inner_text()
    job_errors = page.locator("#job-errors").inner_text()
    assert "job errors: 1, not counted" in job_errors
    assert f"#{made['job_error']}" in job_errors
    decision = page.locator("#decision")
    assert decision.get_attribute("data-decision") != "no-go"
    assert "failed" not in decision.inner_text()
    shoot(page, platform.var_dir, SCREENSHOTS.format("numbers"))

    # The previous snapshot of the same host: the same stack, the same evidence on both sides.
    page.goto(f"{platform.url}/hosts/{HOST}/upgrade-review/?target={before['id']}")
    page.wait_for_selector("#same-stack")
    same = page.locator('#numbers tr[data-kind="smoke"][data-key="matmul_gflops"]')
    assert f"n={current_n}" in same.locator('[data-side="target"]').inner_text()
    shoot(page, platform.var_dir, SCREENSHOTS.format("same-stack"))

    # A planned version nobody knows.
    page.fill("#planned-form input[name=torch_npu]", "2.1.0.post99")
    page.click("#planned-form button[type=submit]")
    page.wait_for_selector("#unknown-versions")
    assert "unknown version" in page.locator("#decision .h5").inner_text()
    unknown = page.locator('#unknown-versions [data-field="torch_npu"]').inner_text()
    assert "2.1.0.post99" in unknown
    assert "2.1.0.post17" in unknown
    shoot(page, platform.var_dir, SCREENSHOTS.format("unknown-version"))
    page.close()
