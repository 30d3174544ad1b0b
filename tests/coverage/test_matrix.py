"""The matrix page, its filters and cells, the run page's progress, and the results API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from npulab.coverage.matrix import matrix, progress
from tests.coverage.builders import coverage_run, ingest, op_result, plan, with_results
from workers.kinds.coverage import BACKWARD, CRASH, ERROR, MISMATCH, PASS, UNSUPPORTED

pytestmark = pytest.mark.django_db

CELLS = {
    ("add", "float32"): PASS,
    ("add", "float16"): PASS,
    ("add", "bool"): UNSUPPORTED,
    ("nn.functional.conv2d", "float32"): PASS,
    ("nn.functional.conv2d", "float16"): MISMATCH,
    ("linalg.svd", "float32"): CRASH,
}


def test_the_matrix_has_an_op_a_row_a_dtype_a_column_and_pass_rates() -> None:
    run = with_results(CELLS)
    table = matrix(run)
    assert table.dtypes == ["float32", "float16", "bool"]  # torch's order, not the alphabet
    rows = {row.label: row.cells for row in table.rows}
    assert rows == {
        "add": [PASS, PASS, UNSUPPORTED],
        "linalg.svd": [CRASH, None, None],
        "nn.functional.conv2d": [PASS, MISMATCH, None],
    }
    assert [(r.dtype, r.passed, r.tested) for r in table.rates] == [
        ("float32", 2, 3),
        ("float16", 1, 2),
        ("bool", 0, 1),
    ]
    assert table.families == ["linalg", "nn.functional", "torch"]


@pytest.mark.parametrize(
    ("filters", "shown"),
    [
        ({"status": MISMATCH}, ["nn.functional.conv2d"]),
        ({"query": "CONV"}, ["nn.functional.conv2d"]),
        ({"query": "*.s?d"}, ["linalg.svd"]),
        ({"family": "torch"}, ["add"]),
        ({"status": PASS, "family": "linalg"}, []),
    ],
)
def test_filters_keep_the_ops_that_match(filters: dict, shown: list[str]) -> None:
    run = with_results(CELLS)
    assert [row.label for row in matrix(run, **filters).rows] == shown


def test_the_backward_pass_is_a_matrix_of_its_own() -> None:
    run = coverage_run()
    ingest(run, [op_result("add", "float32"), op_result("add", "float32", ERROR, phase=BACKWARD)])
    assert [row.cells for row in matrix(run).rows] == [[PASS]]
    assert [row.cells for row in matrix(run, BACKWARD).rows] == [[ERROR]]
    assert matrix(run).phases == ["backward", "forward"]


def test_progress_counts_results_against_the_plan_with_an_eta() -> None:
    run = coverage_run(status="running")
    run.started_at = timezone.now() - timedelta(seconds=30)
    ingest(run, [plan(40)] + [op_result(f"op{i}", "float32") for i in range(9)])
    ingest(run, [op_result("bad", "float32", CRASH)])
    state = progress(run, now=run.started_at + timedelta(seconds=30))
    assert (state.done, state.total, state.percent) == (10, 40, 25.0)
    assert (state.counts[PASS], state.counts[CRASH], state.counts[ERROR]) == (9, 1, 0)
    assert state.eta_s == pytest.approx(90.0)
    assert [bar[:2] for bar in state.bars] == [(PASS, 9), (CRASH, 1)]


def test_the_matrix_page_renders_every_cell_and_filters_with_htmx(client, owner) -> None:
    client.force_login(owner)
    run = with_results(CELLS)
    page = client.get(f"/runs/{run.pk}/coverage/")
    html = page.content.decode()
    assert page.status_code == 200
    assert html.count('<td class="s-') == 9  # six results and three untested cells
    assert '<tr data-op="linalg.svd" data-variant=""><th title="linalg.svd">' in html
    assert "3 of 3 ops shown" in html
    assert '<th title="2 of 3">67 %</th>' in html  # float32's pass rate

    fragment = client.get(
        f"/runs/{run.pk}/coverage/",
        {"status": CRASH},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="matrix",
    )
    assert fragment.content.decode().startswith('\n<div id="matrix">')
    assert "1 of 3 ops shown" in fragment.content.decode()


def test_a_cell_shows_its_error_and_detail(client, owner) -> None:
    client.force_login(owner)
    run = coverage_run()
    ingest(
        run,
        [
            op_result(
                "nn.functional.conv2d",
                "float16",
                MISMATCH,
                error="max abs error 0.5 > atol 1e-3",
                max_abs_err=0.5,
                max_rel_err=0.01,
                detail={"shapes": [[1, 3, 8, 8]], "reference": "float64 on cpu", "atol": 0.001},
            )
        ],
    )
    page = client.get(
        f"/runs/{run.pk}/coverage/cell/",
        {"op": "nn.functional.conv2d", "variant": "", "dtype": "float16"},
    )
    html = page.content.decode()
    assert "max abs error 0.5 &gt; atol 1e-3" in html
    assert "float64 on cpu" in html
    assert "<dd>0.5</dd>" in html
    assert "<dd>0.01</dd>" in html
    assert (
        client.get(f"/runs/{run.pk}/coverage/cell/", {"op": "nope", "dtype": "float16"}).status_code
        == 404
    )


def test_the_run_page_shows_progress_and_links_the_matrix(client, owner) -> None:
    client.force_login(owner)
    run = coverage_run(status="running")
    ingest(run, [plan(4), op_result("add", "float32"), op_result("mul", "float32", CRASH)])
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="coverage-progress"' in html
    assert "<strong>2</strong> of 4 results (50 %)" in html
    assert f'href="/runs/{run.pk}/coverage/" id="open-matrix"' in html


def test_matrix_pages_of_another_kind_are_404(client, owner) -> None:
    from tests.factories import RunFactory

    client.force_login(owner)
    smoke = RunFactory()
    assert client.get(f"/runs/{smoke.pk}/coverage/").status_code == 404


def test_the_results_api_pages_and_filters(api) -> None:
    run = with_results(CELLS)
    ingest(run, [op_result("add", "float32", ERROR, phase=BACKWARD)])
    url = f"/api/v1/runs/{run.pk}/coverage/"
    body = api.get(url, {"limit": 2}).json()
    assert (body["count"], len(body["results"])) == (7, 2)
    assert body["next"]
    first = body["results"][0]
    assert set(first) == {
        "op",
        "variant",
        "dtype",
        "pass",
        "status",
        "error",
        "max_abs_err",
        "max_rel_err",
        "seconds",
        "samples",
        "family",
        "detail",
    }
    only = api.get(url, {"status": CRASH}).json()["results"]
    assert [(r["op"], r["dtype"]) for r in only] == [("linalg.svd", "float32")]
    assert api.get(url, {"dtype": "float16"}).json()["count"] == 2
    assert api.get(url, {"op": "add"}).json()["count"] == 4
    backward = api.get(url, {"pass": "backward"}).json()["results"]
    assert [(r["op"], r["pass"], r["status"]) for r in backward] == [("add", "backward", ERROR)]
    assert api.get(url, {"status": "sort-of"}).status_code == 400


def test_the_summary_api_gives_progress_and_rates(api) -> None:
    run = with_results(CELLS)
    body = api.get(f"/api/v1/runs/{run.pk}/coverage/summary/").json()
    assert (body["done"], body["total"], body["percent"]) == (6, 6, 100.0)
    assert body["counts"][PASS] == 3
    assert body["rates"][0] == {"dtype": "float32", "passed": 2, "tested": 3, "rate": 2 / 3}
    assert api.get("/api/v1/runs/999999/coverage/summary/").status_code == 404
