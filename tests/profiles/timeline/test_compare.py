"""Two profiles' summaries compared: step time, per op and per kernel type; the compare page;
the step time a ready profile gives the upgrade review."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from harness.timelines import write_trace
from npulab.profiles.compare import compare, step_time_us
from npulab.profiles.evidence import STEP_TIME
from npulab.profiles.models import Profile
from npulab.review.review import review
from npulab.runs.models import Run
from npulab.snapshots.services import do_record_snapshot
from tests.factories import HostFactory, RunFactory
from tests.profiles.timeline.profiles import stored_profile, use_local_stores
from workers.contract import exits


def summary(steps: list[float], ops: dict[str, float], types: dict[str, float], **extra) -> dict:
    """A summary in summarise()'s shape (only the parts the compare reads)."""
    items = [
        {"name": f"ProfilerStep#{i}", "ts_us": i * 1e4, "dur_us": d} for i, d in enumerate(steps)
    ]
    return {
        "steps": {"count": len(steps), "median_us": sorted(steps)[len(steps) // 2], "items": items},
        "top_ops": {
            "by_total": [
                {
                    "name": name,
                    "shapes": "[[32, 64]]",
                    "count": 3,
                    "total_us": us,
                    "self_us": us / 2,
                }
                for name, us in ops.items()
            ],
            "distinct": len(ops),
        },
        "kernel_types": [{"type": t, "us": us, "pct": 0.0} for t, us in types.items()],
        "top_kernels": extra.get("kernels", []),
    }


A = summary(
    [1000.0, 1200.0, 1100.0],
    {"aten::addmm": 300.0, "aten::gelu": 50.0, "aten::copy_": 10.0},
    {"COMPUTATION": 800.0, "COMMUNICATION": 100.0, "MEMORY": 40.0},
    kernels=[{"name": "gemm_a", "type": "COMPUTATION", "us": 700.0, "count": 30}],
)
B = summary(
    [1300.0, 1400.0, 1350.0],
    {"aten::addmm": 450.0, "aten::gelu": 40.0, "aten::npu_fast_gelu": 5.0},
    {"COMPUTATION": 1000.0, "COMMUNICATION": 110.0},
    kernels=[{"name": "MatMulV2", "type": "COMPUTATION", "us": 900.0, "count": 30}],
)


def test_the_step_time_is_the_median_step() -> None:
    assert step_time_us(A) == 1100.0
    assert step_time_us({"steps": [{"dur_us": 5.0}, {"dur_us": 1.0}, {"dur_us": 3.0}]}) == 3.0
    assert step_time_us({}) is None


def test_two_summaries_give_step_op_and_kernel_type_deltas() -> None:
    result = compare(A, B)
    assert (result.step.a_us, result.step.b_us) == (1100.0, 1350.0)
    assert result.step.change == pytest.approx(250 / 1100)
    assert result.steps == (3, 3)
    ops = {row.name: row for row in result.ops}
    assert ops["aten::addmm"].delta_us == 150.0
    assert ops["aten::addmm"].change == pytest.approx(0.5)
    assert (ops["aten::addmm"].a_count, ops["aten::addmm"].b_count) == (3, 3)
    # An op only one side ran has no delta, and says which side it is on.
    assert (ops["aten::copy_"].b_us, ops["aten::copy_"].delta_us) == (None, None)
    assert ops["aten::npu_fast_gelu"].a_us is None
    # Largest change in time first (a gone op's change is all its time), then by name.
    assert [row.name for row in result.ops] == [
        "aten::addmm",
        "aten::copy_",
        "aten::gelu",
        "aten::npu_fast_gelu",
    ]
    types = {row.name: row for row in result.kernel_types}
    assert types["COMPUTATION"].delta_us == 200.0
    assert types["MEMORY"].b_us is None
    # Kernels differ by device (a GPU's gemm, an NPU's MatMulV2): listed, not matched.
    assert {row.name for row in result.kernels} == {"gemm_a", "MatMulV2"}


def test_shapes_of_one_op_are_summed_by_name() -> None:
    rows = {
        "top_ops": {
            "by_total": [
                {"name": "aten::mm", "shapes": "a", "count": 2, "total_us": 10.0},
                {"name": "aten::mm", "shapes": "b", "count": 1, "total_us": 5.0},
            ]
        }
    }
    result = compare(rows, rows)
    assert [(r.name, r.a_us, r.a_count) for r in result.ops] == [("aten::mm", 15.0, 3)]


@pytest.fixture
def stores(settings: Any, tmp_path) -> None:
    use_local_stores(settings, tmp_path)


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "trace.json"
    write_trace(path, 20_000)
    return path


@pytest.mark.django_db
def test_the_compare_page_shows_the_step_time_change(owner, stores, trace) -> None:
    a = stored_profile(RunFactory(), trace, summary=A)
    b = stored_profile(RunFactory(), trace, summary=B)
    client = Client()
    client.force_login(owner)
    page = client.get(reverse("profiles:compare") + f"?a={a.pk}&b={b.pk}")
    assert page.status_code == 200
    text = page.content.decode()
    assert "1.100 ms → 1.350 ms" in text
    assert "+23%" in text
    assert 'data-name="aten::addmm"' in text
    assert 'id="compare-kernel-types"' in text


@pytest.mark.django_db
def test_the_compare_page_names_what_is_wrong(owner, stores, trace) -> None:
    pending = stored_profile(RunFactory(), trace, status=Profile.Status.PENDING)
    client = Client()
    client.force_login(owner)
    page = client.get(reverse("profiles:compare") + f"?a=x1&b={pending.pk}")
    assert page.status_code == 400
    text = page.content.decode()
    assert "a: a profile id is a whole number" in text
    assert f"b: profile {pending.pk} is pending, not ready" in text
    assert client.get(reverse("profiles:compare") + "?a=99999&b=1").status_code == 400


@pytest.mark.django_db
def test_a_ready_profile_gives_the_review_its_runs_step_time(
    cpu_host, document, stores, trace
) -> None:
    current = do_record_snapshot(
        cpu_host, document(torch="2.1.0", torch_npu="2.1.0.post8", cann="8.0.RC3")
    ).snapshot
    target = do_record_snapshot(
        HostFactory(name="staging-01"),
        document(torch="2.5.1", torch_npu="2.5.1", cann="8.1.RC1", hostname="staging-01"),
    ).snapshot

    def succeeded(snapshot) -> Run:
        return RunFactory(
            snapshot=snapshot,
            status=Run.Status.SUCCEEDED,
            finished_at=timezone.now(),
            result={"status": "succeeded", "summary": {"matmul_gflops": 100.0}},
            exit_cause=exits.COMPLETED,
        )

    stored_profile(succeeded(current), trace, summary=A)
    profiled = succeeded(target)
    # Only the run's newest ready profile counts; a pending one is no evidence.
    stored_profile(profiled, trace, summary=summary([900.0], {}, {}))
    stored_profile(profiled, trace, summary=B)
    stored_profile(profiled, trace, status=Profile.Status.PENDING)
    succeeded(target)  # a run with no profile gives no step time

    result = review(current, target=target)
    step = next(row for row in result.numbers if row["key"] == STEP_TIME)
    assert step["current"]["median"] == pytest.approx(1.1)
    assert step["target"]["median"] == pytest.approx(1.35)
    assert (step["current"]["n"], step["target"]["n"]) == (1, 1)
    assert step["lower_is_better"] is True
    assert step["change"] == pytest.approx(0.25 / 1.1)
    assert step["past_threshold"]
    smoke = next(row for row in result.outcomes if row["kind"] == "smoke")
    assert any(delta["key"] == STEP_TIME for delta in smoke["deltas"])


def test_summaries_of_two_real_traces_compare(tmp_path) -> None:
    from npulab.profiles.summary import summarise

    for seed in (1, 2):
        write_trace(tmp_path / f"{seed}.json", 300_000, seed=seed)
    a, b = (summarise(str(tmp_path / f"{seed}.json")) for seed in (1, 2))
    result = compare(a, b)
    assert result.step.a_us == a["steps"]["median_us"]
    assert result.step.b_us == b["steps"]["median_us"]
    assert result.steps == (len(a["steps"]["items"]), len(b["steps"]["items"]))
    types = {row.name: row for row in result.kernel_types}
    computation = next(t for t in a["kernel_types"] if t["type"] == "COMPUTATION")
    assert types["COMPUTATION"].a_us == computation["us"]
    assert {"aten::linear", "aten::addmm"} <= {row.name for row in result.ops}
    assert all(row.a_us is not None and row.b_us is not None for row in result.ops)
    assert result.kernels
