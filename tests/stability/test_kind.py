"""The stability kind on the web: its panel, compare section, review rows and what a fail marks."""

from __future__ import annotations

import pytest
from django.test import Client

from npulab.health.models import DeviceHealth, HostHealth
from npulab.runs.kinds import get as get_kind
from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import (
    do_claim_run,
    do_finish_run,
    do_ingest_events,
    do_submit_run,
)
from tests.conftest import register
from tests.factories import HostFactory
from tests.stability.builders import ingest, interval, stability_run, verdict

pytestmark = pytest.mark.django_db

MISMATCH = "consistency mismatch on device 0 at interval 3: differs (silent data corruption)"


def page(user, url: str) -> str:
    browser = Client()
    browser.force_login(user)
    response = browser.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_the_run_page_shows_the_verdict_its_reasons_and_each_intervals_check(owner) -> None:
    run = stability_run(
        status="failed",
        summary=verdict("fail", MISMATCH, bad=(0,)),
        device_indices=[0],
        exit_cause="consistency_mismatch",
    )
    ingest(run, [interval(1), interval(2), interval(3, consistency="mismatch")])
    html = page(owner, run.get_absolute_url())
    assert 'data-verdict="fail"' in html
    reasons = html[html.index('id="stability-reasons"') :]
    assert MISMATCH in reasons[: reasons.index("</ul>")]
    grid = html[html.index('id="stability-grid"') :]
    grid = grid[: grid.index("</table>")]
    assert grid.count("data-consistency=") == 3
    assert 'data-interval="3" data-consistency="mismatch"' in grid
    assert 'data-consistency="match">match 2<' in html
    assert 'data-consistency="mismatch">mismatch 1<' in html
    assert "device 0</span>" in html  # marked bad


def test_a_running_run_has_no_verdict_yet(owner) -> None:
    run = stability_run(status="running")
    html = page(owner, run.get_absolute_url())
    assert "the verdict comes when the run ends" in html
    assert "data-verdict" not in html


def test_compare_shows_both_verdicts_and_the_throughput_change(owner) -> None:
    host = HostFactory(name="npu-07")
    before = stability_run(summary=verdict("pass"), host=host, name="before upgrade")
    after = stability_run(
        summary=verdict("warn", "throughput of device 0 dropped 30 % below its first intervals'"),
        host=host,
        name="after upgrade",
    )
    ingest(before, [interval(n, throughput=4.0) for n in (1, 2, 3)])
    ingest(after, [interval(n, throughput=3.0) for n in (1, 2, 3)])
    html = page(owner, f"/runs/compare/?ids={before.pk},{after.pk}")
    section = html[html.index('id="stability-compare"') :]
    assert "stability-other-hosts" not in section
    row = section[section.index(f'data-run="{after.pk}"') :]
    row = row[: row.index("</tr>")]
    assert 'class="fw-semibold v-warn"' in row
    assert "dropped 30 %" in row
    assert "3 TFLOP/s" in row
    assert "−25%" in row
    first = section[section.index(f'data-run="{before.pk}"') :]
    assert 'v-pass"' in first[: first.index("</tr>")]


def test_compare_warns_when_the_runs_are_from_different_hosts(owner) -> None:
    one = stability_run(summary=verdict("pass"), host=HostFactory())
    two = stability_run(summary=verdict("pass"), host=HostFactory())
    assert "stability-other-hosts" in page(owner, f"/runs/compare/?ids={one.pk},{two.pk}")


def test_the_review_gets_both_verdicts_a_worse_one_as_a_regression_and_the_headlines() -> None:
    kind = get_kind("stability")
    baseline = stability_run(
        summary=verdict("pass", throughput=4.0, worst_drop_pct=1.0, peak_temperature_c=70.0)
    )
    candidate = stability_run(summary=verdict("warn", "hot", mismatches=0))
    rows = {row.name: row for row in kind.result_changes(baseline, candidate)}
    assert (rows["verdict"].baseline, rows["verdict"].candidate) == ("pass", "warn")
    assert rows["verdict"].regression
    assert not rows["consistency_mismatches"].regression
    assert not kind.result_changes(candidate, baseline)[0].regression
    headlines = kind.headlines(baseline)
    assert set(headlines) == {"throughput", "worst_drop_pct", "peak_temperature_c"}
    assert headlines["peak_temperature_c"].lower_is_better
    assert not headlines["throughput"].lower_is_better


def test_the_review_groups_runs_by_their_work() -> None:
    kind = get_kind("stability")
    plain = stability_run(spec={"workload": "conv", "dtype": "bfloat16", "size": 64})
    assert kind.review_group(plain) == "conv · bfloat16 · size 64"


def finished(owner, host, summary: dict, cause: str, status: str = "failed", **spec) -> Run:
    """A stability run through the real write path: submit, place, claim, result, finish."""
    run = do_submit_run(
        owner, {"kind": "stability", "device_type": "cpu", "duration_s": 4, "interval_s": 1, **spec}
    )
    place_queued_runs()
    do_claim_run(host, run.pk, 1)
    result = {"type": "result", "time": 5.0, "status": status, "reason": "r", "summary": summary}
    if cause:
        result["cause"] = cause
    do_ingest_events(host, run.pk, 1, 0, 10, [result])
    return do_finish_run(host, run.pk, 1, {"exit_code": 0 if status == "succeeded" else 1})


def test_a_failed_verdict_marks_the_device_bad_and_its_host_degraded_on_commit(
    owner, django_capture_on_commit_callbacks
) -> None:
    # Two devices: one bad device leaves the host degraded (all bad would be unhealthy).
    host = register(HostFactory(name="cpu-09"), devices=2)
    with django_capture_on_commit_callbacks(execute=True):
        run = finished(owner, host, verdict("fail", MISMATCH, bad=(0,)), "consistency_mismatch")
    assert run.status == "failed"
    [index] = run.device_indices
    device = DeviceHealth.objects.get(host=host, index=index)
    assert device.state == "bad"
    assert MISMATCH in str(device.reasons)
    assert f"run {run.pk}" in str(device.reasons)
    assert HostHealth.objects.get(host=host).state == "degraded"


def test_nothing_is_marked_before_the_transaction_commits(
    owner, django_capture_on_commit_callbacks
) -> None:
    host = register(HostFactory(name="cpu-10"))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        finished(owner, host, verdict("fail", MISMATCH, bad=(0,)), "consistency_mismatch")
    assert not DeviceHealth.objects.filter(host=host, state="bad").exists()
    for callback in callbacks:
        callback()
    assert DeviceHealth.objects.get(host=host, index=0).state == "bad"


def test_a_pass_or_warn_marks_nothing(owner, django_capture_on_commit_callbacks) -> None:
    host = register(HostFactory(name="cpu-11"))
    with django_capture_on_commit_callbacks(execute=True):
        finished(owner, host, verdict("warn", "hot"), "", status="succeeded")
    assert not DeviceHealth.objects.filter(host=host, state="bad").exists()


def test_a_process_that_died_under_a_built_in_load_is_a_fail_of_its_devices(
    owner, django_capture_on_commit_callbacks
) -> None:
    host = register(HostFactory(name="cpu-12"))
    with django_capture_on_commit_callbacks(execute=True):
        run = finished(owner, host, {"stderr_tail": []}, "process_exit")
    assert run.exit_cause == "process_exit"
    device = DeviceHealth.objects.get(host=host, index=0)
    assert device.state == "bad"
    assert "process died under load" in str(device.reasons)


def test_a_users_own_workload_that_crashes_marks_nothing(
    owner, django_capture_on_commit_callbacks
) -> None:
    host = register(HostFactory(name="cpu-13"))
    with django_capture_on_commit_callbacks(execute=True):
        finished(owner, host, {"stderr_tail": []}, "process_exit", workload="mine:burn")
    assert not DeviceHealth.objects.filter(host=host, state="bad").exists()


def test_the_host_index_of_the_bad_device_is_marked(owner) -> None:
    host = register(HostFactory(name="npu-03"), device_type="npu", devices=4)
    run = stability_run(
        status="failed",
        summary=verdict("fail", "device 1 failed", bad=(1,)),
        host=host,
        spec={"device_type": "npu", "devices": 2},
        device_indices=[2, 3],
    )
    get_kind("stability").on_finished(run)
    assert list(
        DeviceHealth.objects.filter(host=host, state="bad").values_list("index", flat=True)
    ) == [3]


def test_injected_faults_are_refused_unless_the_platform_allows_them(
    api, cpu_host, settings
) -> None:
    spec = {
        "kind": "stability",
        "device_type": "cpu",
        "duration_s": 5,
        "interval_s": 1,
        "faults": "mismatch:interval=2,device=0",
    }
    refused = api.post("/api/v1/runs/", spec, format="json")
    assert refused.status_code == 400
    assert "NPULAB_STABILITY_ALLOW_FAULTS" in refused.json()["faults"][0]
    assert not Run.objects.exists()
    settings.NPULAB = {**settings.NPULAB, "STABILITY_ALLOW_FAULTS": True}
    assert api.post("/api/v1/runs/", spec, format="json").status_code == 201
