"""GET /api/v1/hosts/<name>/upgrade-review/: what a pipeline asks before rolling an image out."""

from __future__ import annotations

import pytest

from npulab.projects.models import Membership, Project
from npulab.runs.models import Run
from npulab.snapshots.services import do_record_snapshot
from tests.conftest import token_client
from tests.factories import HostFactory
from tests.review.test_review import finished, user_ended
from workers.contract import exits

pytestmark = pytest.mark.django_db
URL = "/api/v1/hosts/cpu-01/upgrade-review/"
STACK = {"torch": "2.1.0", "torch_npu": "2.1.0.post8", "cann": "8.0.RC3"}


@pytest.fixture
def upgraded(cpu_host, document):
    """cpu-01 after a `pip install` (same stack), and a staging host on a newer one."""
    before = do_record_snapshot(cpu_host, document(**STACK)).snapshot
    for gflops in (98.0, 100.0, 102.0):
        finished(before, gflops=gflops)
    do_record_snapshot(cpu_host, document(packages={"requests": "2.99.0"}, **STACK))
    staging = do_record_snapshot(
        HostFactory(name="staging-01"),
        document(torch="2.5.1", torch_npu="2.5.1", cann="8.1.RC1", hostname="staging-01"),
    ).snapshot
    for gflops in (101.0, 103.0, 105.0):
        finished(staging, gflops=gflops)
    job_error = user_ended(staging, exits.JOB_ERROR)
    return staging, job_error


def test_the_review_answers_with_numbers_on_both_sides(api, upgraded) -> None:
    staging, job_error = upgraded

    response = api.get(URL, {"target": staging.pk})

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["decision"] == "go", body["reasons"]
    assert body["reasons"] == [
        "compatible, no error findings, smoke runs succeeded under the target"
    ]
    gflops = next(row for row in body["numbers"]["smoke"] if row["key"] == "matmul_gflops")
    assert gflops["current"] == {"median": 100.0, "min": 98.0, "max": 102.0, "n": 3}
    assert gflops["target"] == {"median": 103.0, "min": 101.0, "max": 105.0, "n": 3}
    assert gflops["change"] == pytest.approx(0.03)
    assert (gflops["regression"], gflops["few_runs"]) == (False, False)
    assert [run["id"] for run in body["job_errors"]["target"]] == [job_error.pk]
    assert body["job_errors"]["current"] == []
    assert body["stack"]["current"]["torch_npu"] == "2.1.0.post8"
    assert body["stack"]["target"]["torch_npu"] == "2.5.1"
    assert body["same_stack"] is False
    assert "requests" in body["other_changes"]["packages"]["changed"]
    # The fields the review had before stay.
    assert {"current", "target", "planned", "changes", "compatibility", "outcomes"} <= set(body)
    assert body["outcomes"][0]["deltas"][0]["key"] == "matmul_gflops"


def test_an_unknown_planned_version_is_named_with_the_nearest_known(api, upgraded) -> None:
    body = api.get(URL, {"torch_npu": "2.1.0.post99"}).json()
    assert body["decision"] == "caution"
    assert body["unknown_versions"][0]["field"] == "torch_npu"
    assert body["unknown_versions"][0]["nearest"][:2] == ["2.1.0.post13", "2.1.0.post17"]
    assert body["reasons"][0].startswith("torch_npu 2.1.0.post99 is an unknown version")


def test_a_bad_target_is_a_400_naming_the_field(api, upgraded) -> None:
    response = api.get(URL, {"target": 999999})
    assert response.status_code == 400
    assert "target" in response.json()


def test_job_errors_of_another_project_are_counted_but_not_named(api, other_api, upgraded) -> None:
    staging, job_error = upgraded
    project = Project.objects.create(slug="secret", name="Secret")
    Run.objects.filter(pk=job_error.pk).update(project=project)

    outsider = other_api.get(URL, {"target": staging.pk}).json()

    assert outsider["job_errors"]["target"] == []
    assert outsider["decision"] == api.get(URL, {"target": staging.pk}).json()["decision"]
    Membership.objects.create(project=project, user=job_error.submitted_by, role="viewer")
    named = token_client(job_error.submitted_by).get(URL, {"target": staging.pk}).json()
    assert [run["id"] for run in named["job_errors"]["target"]] == [job_error.pk]
