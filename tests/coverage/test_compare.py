"""Two coverage runs cell by cell, as a page, as JSON and as JUnit XML that CI servers read."""

from __future__ import annotations

import pytest
import xmlschema
from django.utils import timezone
from junitparser import Failure, JUnitXml, Skipped

from npulab.coverage.compare import compare, known_good_baseline
from npulab.snapshots.models import Snapshot
from tests.coverage.builders import coverage_run, with_results
from tests.factories import HostFactory
from tests.paths import TESTS_DIR
from workers.kinds.coverage import CRASH, ERROR, MISMATCH, PASS, UNCLAIMED, UNSUPPORTED, UNTESTED

pytestmark = pytest.mark.django_db
JUNIT_SCHEMA = xmlschema.XMLSchema(str(TESTS_DIR / "fixtures" / "junit.xsd"))

BASELINE = {
    ("add", "float32"): PASS,
    ("add", "bfloat16"): PASS,
    ("mul", "float32"): PASS,
    ("nn.functional.conv2d", "float16"): UNSUPPORTED,
    ("linalg.svd", "float32"): MISMATCH,
    ("sort", "float32"): ERROR,
    ("gone", "float32"): PASS,
}
# After the "upgrade": add bfloat16 regressed (crashes), conv2d float16 got a kernel,
# svd fails differently, sort is as it was, a new op appeared, one op was not tested.
CANDIDATE = {
    ("add", "float32"): PASS,
    ("add", "bfloat16"): CRASH,
    ("mul", "float32"): PASS,
    ("nn.functional.conv2d", "float16"): PASS,
    ("linalg.svd", "float32"): ERROR,
    ("sort", "float32"): ERROR,
    ("topk", "float32"): UNSUPPORTED,
}


def cells(changes) -> set[tuple[str, str]]:
    return {(change.label, change.dtype) for change in changes}


def test_cells_are_grouped_by_how_they_changed() -> None:
    result = compare(with_results(BASELINE), with_results(CANDIDATE))
    groups = result.groups
    assert cells(groups["regressions"]) == {("add", "bfloat16")}
    assert cells(groups["fixes"]) == {("nn.functional.conv2d", "float16")}
    assert cells(groups["new"]) == {("topk", "float32")}
    assert cells(groups["changed"]) == {("linalg.svd", "float32")}
    assert cells(groups["unchanged"]) == {
        ("add", "float32"),
        ("mul", "float32"),
        ("sort", "float32"),
    }
    assert cells(groups["missing"]) == {("gone", "float32")}
    assert result.regressions == 1


def test_the_api_comparison_counts_and_lists_each_group(api) -> None:
    baseline, candidate = with_results(BASELINE), with_results(CANDIDATE)
    response = api.get(f"/api/v1/runs/{candidate.pk}/coverage/compare/", {"baseline": baseline.pk})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["regressions"] == 1
    assert body["counts"] == {
        "regressions": 1,
        "fixes": 1,
        "new": 1,
        "changed": 1,
        "unchanged": 3,
        "missing": 1,
    }
    (regression,) = body["groups"]["regressions"]
    assert (regression["op"], regression["dtype"]) == ("add", "bfloat16")
    assert regression["pass"] == "forward"
    assert regression["baseline"]["status"] == PASS
    assert regression["candidate"] == {
        "status": CRASH,
        "error": "crash in add",
        "max_abs_err": None,
        "max_rel_err": None,
    }
    assert (body["baseline"]["id"], body["candidate"]["id"]) == (baseline.pk, candidate.pk)


def test_the_junit_export_has_one_case_per_cell_and_fails_only_regressions(api) -> None:
    baseline, candidate = with_results(BASELINE), with_results(CANDIDATE)
    response = api.get(
        f"/api/v1/runs/{candidate.pk}/coverage/compare/",
        {"baseline": baseline.pk, "format": "junit"},
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "application/xml"
    JUNIT_SCHEMA.validate(response.content.decode())

    report = JUnitXml.fromstring(response.content)
    (suite,) = list(report)
    cases = {case.name: case for case in suite}
    # The candidate's cells; the one it did not test is no test case.
    assert set(cases) == {f"{op} {dtype}" for op, dtype in CANDIDATE}
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (7, 1, 0, 3)
    (failure,) = cases["add bfloat16"].result
    assert isinstance(failure, Failure)
    assert failure.type == CRASH
    assert failure.message == f"passed in run #{baseline.pk}, crash now"
    assert cases["add bfloat16"].classname == "coverage.torch"
    assert isinstance(cases["topk float32"].result[0], Skipped)
    assert cases["nn.functional.conv2d float16"].is_passed
    assert cases["nn.functional.conv2d float16"].classname == "coverage.nn.functional"


def test_control_characters_in_an_error_do_not_break_the_xml(api) -> None:
    from tests.coverage.builders import ingest, op_result

    baseline = with_results({("add", "float32"): PASS})
    candidate = coverage_run()
    ingest(candidate, [op_result("add", "float32", ERROR, error="bad \x1b[31m\x07 bytes")])
    response = api.get(
        f"/api/v1/runs/{candidate.pk}/coverage/compare/",
        {"baseline": baseline.pk, "format": "junit"},
    )
    JUNIT_SCHEMA.validate(response.content.decode())
    assert "bad \ufffd[31m\ufffd bytes" in response.content.decode()


def mark_known_good(run, owner) -> None:
    snapshot = Snapshot.objects.get(pk=run.snapshot_id)
    snapshot.known_good_at, snapshot.known_good_by = timezone.now(), owner
    snapshot.save()


def test_known_good_is_the_newest_like_run_on_a_known_good_snapshot(owner, collected) -> None:
    from npulab.snapshots.services import do_record_snapshot

    host, other_host = HostFactory(name="npu-a"), HostFactory(name="npu-b")
    good = do_record_snapshot(host, collected).snapshot
    good.known_good_at = timezone.now()
    good.save()
    elsewhere = do_record_snapshot(other_host, collected).snapshot
    elsewhere.known_good_at = timezone.now()
    elsewhere.save()

    on_this_host = coverage_run(host=host, snapshot=good)
    coverage_run(host=other_host, snapshot=elsewhere)  # newer, but another host
    coverage_run(host=host, snapshot=good, spec={"op_set": "list", "ops": ["add"]})
    coverage_run(host=host, snapshot=good, status="failed")
    candidate = coverage_run(host=host)

    assert known_good_baseline(candidate) == on_this_host


def test_a_missing_or_bad_baseline_is_a_clear_error(api) -> None:
    candidate = with_results(CANDIDATE)
    url = f"/api/v1/runs/{candidate.pk}/coverage/compare/"

    response = api.get(url)  # known-good by default, and there is none
    assert response.status_code == 404
    assert (
        "no succeeded cpu coverage run of op set 'opinfo' on a known-good snapshot"
        in (response.json()["detail"])
    )
    response = api.get(url, {"baseline": "yesterday", "format": "junit"})
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["baseline"] == ["'yesterday' is not a run id nor 'known-good'"]
    assert api.get(url, {"baseline": str(10**30)}).status_code == 400
    assert api.get(url, {"baseline": "999999"}).status_code == 404
    assert api.get("/api/v1/runs/999999/coverage/compare/").status_code == 404


def test_works_unclaimed_is_carried_into_the_compare_view_and_the_junit(api, client, owner):
    baseline = with_results(
        {("cumsum", "bool"): PASS, ("embedding", "int64"): UNSUPPORTED, ("svd", "float16"): PASS}
    )
    candidate = with_results(
        {
            ("cumsum", "bool"): UNCLAIMED,
            ("embedding", "int64"): UNCLAIMED,
            ("svd", "float16"): UNTESTED,
        }
    )
    groups = compare(baseline, candidate).groups
    # Working either way: a change of status, not a regression; gaining it is a fix.
    assert cells(groups["changed"]) == {("cumsum", "bool")}
    assert cells(groups["fixes"]) == {("embedding", "int64")}
    # A pass that turns out untested is no longer known to work.
    assert cells(groups["regressions"]) == {("svd", "float16")}
    report = api.get(
        f"/api/v1/runs/{candidate.pk}/coverage/compare/",
        {"baseline": baseline.pk, "format": "junit"},
    ).content
    JUNIT_SCHEMA.validate(report.decode())
    cases = {case.name: case for case in next(iter(JUnitXml.fromstring(report)))}
    assert cases["cumsum bool"].is_passed
    assert cases["cumsum bool"].system_out == "works, unclaimed (changed)"
    client.force_login(owner)
    html = client.get(
        f"/runs/{candidate.pk}/coverage/compare/", {"baseline": baseline.pk, "all": "1"}
    ).content.decode()
    assert "works, unclaimed" in html


def test_the_compare_page_lists_regressions_first_and_links_the_junit(client, owner) -> None:
    client.force_login(owner)
    baseline, candidate = with_results(BASELINE), with_results(CANDIDATE)
    page = client.get(f"/runs/{candidate.pk}/coverage/compare/", {"baseline": baseline.pk})
    html = page.content.decode()
    assert page.status_code == 200
    assert html.index('id="group-regressions"') < html.index('id="group-fixes"')
    assert 'data-op="add" data-dtype="bfloat16"' in html
    assert f"?baseline={baseline.pk}&amp;format=junit" in html
    assert 'id="group-unchanged"' not in html  # counted, not listed


def test_the_compare_page_says_when_there_is_no_known_good_baseline(client, owner) -> None:
    client.force_login(owner)
    candidate = with_results(CANDIDATE)
    page = client.get(f"/runs/{candidate.pk}/coverage/compare/")
    assert page.status_code == 200
    assert "on a known-good snapshot: mark a snapshot known-good, or give a run id" in (
        page.content.decode()
    )


def test_the_runs_compare_page_counts_each_later_runs_cells_against_the_first(
    client, owner
) -> None:
    client.force_login(owner)
    baseline, candidate = with_results(BASELINE), with_results(CANDIDATE)
    page = client.get("/runs/compare/", {"ids": f"{baseline.pk},{candidate.pk}"})
    html = page.content.decode()
    assert page.status_code == 200
    section = html[html.index('id="coverage-compare"') :]
    assert f"Operator coverage against run #{baseline.pk}" in section
    assert f'href="/runs/{candidate.pk}/coverage/compare/?baseline={baseline.pk}"' in section
    assert '<td class="text-danger fw-semibold">1</td>' in section  # the one regression
