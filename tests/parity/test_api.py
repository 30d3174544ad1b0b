"""Parity layers: stored from their events, paged with the first divergent one, exported,
shown on the run page, and compared by the upgrade review."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import pytest
from openpyxl import load_workbook

from npulab.parity.models import ParityLayer
from npulab.review.review import review
from npulab.runs.models import RunEvent
from npulab.snapshots.services import do_record_snapshot
from tests.factories import HostFactory
from tests.parity.builders import ingest, layer, parity_run
from tests.stability.builders import stability_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def diverged(owner: Any) -> Any:
    run = parity_run(
        status="failed",
        submitted_by=owner,
        exit_cause="parity_diverged",
        summary={"layers": 60, "broken_layers": 2, "min_cosine": 0.5},
    )
    events = [layer(index) for index in range(60)]
    events[7] = layer(7, cosine=0.5, broken=("cosine",))
    events[30] = layer(30, cosine=0.9, broken=("cosine",))
    ingest(run, events)
    return run


def test_layers_are_rows_in_execution_order_and_not_events(diverged: Any) -> None:
    rows = list(ParityLayer.objects.filter(run=diverged))
    assert [row.index for row in rows] == list(range(60))
    assert rows[7].broken == ["cosine"]
    assert rows[7].stack == ["/srv/model.py:27 in forward: x = self.layer7(x)"]
    assert not RunEvent.objects.filter(run=diverged, type="parity_layer").exists()


def test_a_batch_delivered_twice_keeps_one_row_per_layer(diverged: Any) -> None:
    ingest(diverged, [layer(0), layer(1)])
    assert ParityLayer.objects.filter(run=diverged).count() == 60


def test_a_hostile_layer_line_is_a_visible_log_line_and_the_rest_is_kept(owner: Any) -> None:
    run = parity_run(status="running", submitted_by=owner)
    ingest(
        run,
        [
            layer(0),
            layer(-1),
            {"type": "parity_layer", "index": 2},  # no name
            layer(3, stack=["ok", 7, {"x": 1}], broken=["cosine", None]),
        ],
    )
    rows = list(ParityLayer.objects.filter(run=run))
    assert [row.index for row in rows] == [0, 3]
    assert rows[1].stack == ["ok"]
    assert rows[1].broken == ["cosine"]
    assert RunEvent.objects.filter(run=run, type="log").count() == 2


def test_the_api_pages_the_layers_with_the_first_divergent_one(api: Any, diverged: Any) -> None:
    answer = api.get(f"/api/v1/runs/{diverged.pk}/parity/", {"limit": 20}).json()
    assert answer["first_divergent"] == {
        "name": "Functional.linear.7.forward.output.0",
        "cosine": 0.5,
        "max_abs_err": 0.001,
        "max_rel_err": 0.01,
        "stack": ["/srv/model.py:27 in forward: x = self.layer7(x)"],
        "index": 7,
        "broken": ["cosine"],
    }
    assert answer["count"] == 60
    assert [row["index"] for row in answer["layers"]] == list(range(20))
    assert answer["layers"][0]["one_thousandth_ratio"] == 0.5
    assert answer["next"].endswith("limit=20&offset=20")
    last = api.get(f"/api/v1/runs/{diverged.pk}/parity/", {"limit": 20, "offset": 40}).json()
    assert last["next"] is None
    assert api.get(f"/api/v1/runs/{diverged.pk}/parity/", {"limit": "x"}).status_code == 400


def test_csv_and_xlsx_exports_hold_every_layer(api: Any, diverged: Any) -> None:
    exported = api.get(f"/api/v1/runs/{diverged.pk}/parity/", {"format": "csv"})
    assert exported["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.content.decode())))
    assert len(rows) == 60
    assert (rows[7]["broken"], rows[7]["cosine"]) == ("cosine", "0.5")
    book = api.get(f"/api/v1/runs/{diverged.pk}/parity/", {"format": "xlsx"})
    sheet = load_workbook(io.BytesIO(book.content)).worksheets[0]
    lines = list(sheet.iter_rows(values_only=True))
    assert lines[0][:7] == (
        "NPU Name",
        "Bench Name",
        "NPU Dtype",
        "Bench Dtype",
        "NPU Tensor Shape",
        "Bench Tensor Shape",
        "Cosine",
    )
    assert len(lines) == 61
    assert lines[8][6] == 0.5
    assert lines[8][12:14] == ("error", "cosine")


def test_another_kinds_run_is_404_and_anonymous_is_refused(
    api: Any, anon_api: Any, diverged
) -> None:
    other = stability_run(submitted_by=diverged.submitted_by)
    answer = api.get(f"/api/v1/runs/{other.pk}/parity/")
    assert answer.status_code == 404
    assert "not a parity run" in answer.json()["detail"]
    assert anon_api.get(f"/api/v1/runs/{diverged.pk}/parity/").status_code in (401, 403)


def test_the_run_page_puts_the_first_divergent_layer_on_top(client: Any, owner, diverged) -> None:
    client.force_login(owner)
    page = client.get(f"/runs/{diverged.pk}/").content.decode()
    table = page[page.index('id="parity-table"') :]
    assert table.index('id="parity-first"') < table.index('data-index="0"')
    assert table.count("data-broken=") == 2


def test_the_upgrade_review_compares_parity_and_int8_per_stack(cpu_host, document) -> None:
    current = do_record_snapshot(cpu_host, document(torch="2.1.0", cann="8.0.RC3")).snapshot
    host = HostFactory(name="staging-01")
    target = do_record_snapshot(
        host, document(torch="2.5.1", cann="8.1.RC1", hostname="staging-01")
    ).snapshot
    numbers = {"layers": 10, "broken_layers": 0, "nan_layers": 0, "loss": {"max_rel_diff": 0.01}}
    parity_run(
        snapshot=current,
        summary={**numbers, "min_cosine": 0.9999, "int8": {"delta": -0.001, "delta_kept": 0.0}},
    )
    parity_run(
        snapshot=target,
        summary={**numbers, "min_cosine": 0.991, "int8": {"delta": -0.2, "delta_kept": -0.01}},
    )
    result = review(current, target=target)
    row = next(row for row in result.outcomes if row["kind"] == "parity")
    deltas = {delta["key"]: delta for delta in row["deltas"]}
    assert (deltas["min_cosine"]["current"], deltas["min_cosine"]["target"]) == (0.9999, 0.991)
    assert (deltas["int8_delta"]["current"], deltas["int8_delta"]["target"]) == (-0.001, -0.2)
    assert deltas["int8_delta"]["worse"]
    assert "int8_delta_kept" in deltas
    assert "loss_max_rel_diff" in deltas


def metric(step: int, value: float) -> dict:
    return {"type": "metric", "time": 100.0 + step, "key": "loss", "step": step, "value": value}


def test_loss_parity_of_two_existing_runs_of_any_kind(api: Any, owner: Any) -> None:
    side_a = stability_run(status="running", submitted_by=owner)
    side_b = parity_run(status="running", submitted_by=owner)
    ingest(side_a, [metric(step, 1.0 / (step + 1)) for step in range(5)])
    ingest(
        side_b, [metric(step, 1.0 / (step + 1) * (1.2 if step >= 3 else 1.0)) for step in range(6)]
    )
    url = f"/api/v1/runs/{side_b.pk}/parity/loss/"
    found = api.get(url, {"against": side_a.pk, "rtol": "0.1"}).json()
    assert found["steps"] == 5
    assert found["max_rel_diff"] == pytest.approx(0.2)
    assert found["first_step_past_tolerance"] == 3
    assert (found["only_a"], found["only_b"]) == (0, 1)
    assert (
        api.get(url, {"against": side_a.pk, "rtol": "0.5"}).json()["first_step_past_tolerance"]
        is None
    )
    assert api.get(url, {"against": "x"}).status_code == 400
    assert api.get(url, {"against": side_a.pk, "rtol": "-1"}).status_code == 400
    assert api.get(url, {"against": 999999}).status_code == 404


def test_a_loss_that_is_not_finite_on_one_side_is_past_any_tolerance(api: Any, owner: Any) -> None:
    side_a = stability_run(status="running", submitted_by=owner)
    side_b = parity_run(status="running", submitted_by=owner)
    ingest(side_a, [metric(step, 1.0) for step in range(4)])
    # Stored as no value: the side's curve has a step without a loss.
    ingest(side_b, [metric(step, math.nan if step == 2 else 1.0) for step in range(4)])
    url = f"/api/v1/runs/{side_b.pk}/parity/loss/"
    found = api.get(url, {"against": side_a.pk, "rtol": "0.5"}).json()
    assert (found["steps"], found["first_step_past_tolerance"]) == (4, 2)
    assert found["max_rel_diff"] is None


def test_the_run_page_draws_int8_sensitivity_as_bars(client: Any, owner: Any) -> None:
    int8 = {
        "method": "torch.ao FX post-training static INT8",
        "fp32_metric": 0.9,
        "int8_metric": 0.7,
        "delta": -0.2,
        "tolerance": 0.01,
        "keep": ["layer2"],
        "delta_kept": -0.005,
        "layers": [
            {
                "name": "layer1",
                "cosine": 0.999,
                "max_abs_err": 0.01,
                "metric": 0.89,
                "delta": -0.01,
            },
            {"name": "layer2", "cosine": 0.9, "max_abs_err": 0.5, "metric": 0.7, "delta": -0.2},
        ],
    }
    run = parity_run(submitted_by=owner, summary={"layers": 0, "int8": int8})
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    bars = page[page.index('id="parity-int8-bars"') :]
    assert bars.count("<rect") == 2
    assert 'data-layer="layer2" data-kept="1"' in bars
    # The most harmful layer has the longest bar.
    assert 'width="300.0"' in bars
    assert "keeping <b>layer2</b> in float32" in page
