"""Parity runs on the CPU through web, Celery and the host worker: msprobe dumps both sides,
the layers land in their table, the API pages and exports them, the page shows them, and
``npulab parity`` gates on them."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from harness.stack import Platform
from tests.e2e.accessibility import assert_leads_with
from tests.e2e.conftest import write_script
from tests.e2e.test_cli_e2e import npulab
from workers.contract import exits

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
pytest.importorskip("msprobe", reason="mindstudio-probe (the parity extra) is not installed")

SCRIPT = Path(__file__).parents[1] / "workers" / "parity" / "model_script.py"


def test_float32_against_bfloat16_passes_and_is_paged_exported_and_shown(
    platform: Platform, browser, tmp_path: Path
) -> None:
    run_id = platform.submit(
        kind="parity",
        entry="builtin:mlp",
        layers=4,
        steps=4,
        b={"dtype": "bfloat16"},
        name="parity e2e",
    )["id"]
    run = platform.wait(run_id, timeout=600)
    assert run["status"] == "succeeded", f"{run}\n{platform.tail()}"
    summary = run["result"]["summary"]
    assert summary["thresholds"]["dtype"] == "bfloat16"
    assert summary["loss"]["steps"] == 4

    first = platform.api("GET", f"runs/{run_id}/parity/", params={"limit": 10}).json()
    assert first["first_divergent"] is None
    assert first["count"] == summary["layers"] > 10
    assert [layer["index"] for layer in first["layers"]] == list(range(10))
    assert first["next"]
    assert all(layer["cosine"] is None or layer["cosine"] > 0.99 for layer in first["layers"])
    second = platform.api("GET", first["next"].split("/api/v1/", 1)[1]).json()
    assert second["layers"][0]["index"] == 10

    exported = platform.api("GET", f"runs/{run_id}/parity/", params={"format": "csv"})
    assert exported.headers["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert len(rows) == summary["layers"]
    assert rows[0]["name"] == first["layers"][0]["name"]
    xlsx = platform.api("GET", f"runs/{run_id}/parity/", params={"format": "xlsx"})
    openpyxl = pytest.importorskip("openpyxl")
    sheet = openpyxl.load_workbook(io.BytesIO(xlsx.content)).worksheets[0]
    header = [cell.value for cell in sheet[1]]
    assert header[:2] == ["NPU Name", "Bench Name"]
    assert "Cosine" in header
    assert sheet.max_row == summary["layers"] + 1

    # Both sides' losses are series of the run.
    loss = platform.api("GET", f"runs/{run_id}/metrics/", params={"key": "parity_loss/b"})
    assert [step for step, _ in loss.json()["points"]] == [0, 1, 2, 3]

    gate = npulab(platform, tmp_path, "parity", str(run_id))
    assert gate.returncode == exits.CLI_SUCCEEDED, gate.stdout + gate.stderr
    # A stricter gate than the run's own re-judges the stored layers.
    strict = npulab(platform, tmp_path, "parity", str(run_id), "--cosine-min", "0.9999999")
    assert strict.returncode == exits.CLI_JOB_FAILED, strict.stdout + strict.stderr
    assert "first divergent" in strict.stdout
    # Loss-curve parity of runs that exist: a run's own curve against itself is equal.
    same = npulab(
        platform,
        tmp_path,
        "parity",
        str(run_id),
        "--against",
        str(run_id),
        "--key",
        "parity_loss/b",
    )
    assert same.returncode == exits.CLI_SUCCEEDED, same.stdout + same.stderr
    assert "4 common steps" in same.stdout

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    platform.log_in(page)
    page.goto(f"{platform.url}/runs/{run_id}/")
    assert page.locator("#parity-layers").get_attribute("data-verdict") == "pass"
    assert_leads_with(page, "#parity-layers", platform.var_dir, "pages-parity-run")
    assert page.locator("#parity-table tbody tr").count() == min(summary["layers"], 200)
    assert page.locator("#parity-first").count() == 0
    assert page.locator("#parity-loss polyline[data-side='a']").get_attribute("points")
    assert page.locator("#parity-loss polyline[data-side='b']").get_attribute("points")
    page.screenshot(path=str(platform.var_dir / "parity-run.png"), full_page=True)
    page.close()


def test_a_perturbed_layer_fails_the_run_names_it_with_its_call_site_and_gates(
    platform: Platform, browser, tmp_path: Path, scripts_dir: Path
) -> None:
    script = write_script(scripts_dir, "model_script.py", SCRIPT.read_text())
    run_id = platform.submit(
        kind="parity", entry=str(script), args=["noise"], steps=2, name="parity noise"
    )["id"]
    run = platform.wait(run_id, timeout=600)
    assert run["status"] == "failed", f"{run}\n{platform.tail()}"
    assert run["exit_cause"] == "parity_diverged", f"{run['exit_reason']}\n{platform.tail()}"

    answer = platform.api("GET", f"runs/{run_id}/parity/").json()
    first = answer["first_divergent"]
    assert first["name"] == "Functional.linear.1.forward.input.1"
    assert first["cosine"] < 0.99
    assert set(first) >= {"name", "cosine", "max_abs_err", "max_rel_err", "stack"}
    assert first["stack"][0].endswith("in forward: x = self.second(x)")
    broken = [layer for layer in answer["layers"] if layer["broken"]]
    assert broken[0]["index"] == first["index"]

    gate = npulab(platform, tmp_path, "parity", str(run_id))
    assert gate.returncode == exits.CLI_JOB_FAILED, gate.stdout + gate.stderr
    assert "Functional.linear.1.forward.input.1" in gate.stdout

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    platform.log_in(page)
    page.goto(f"{platform.url}/runs/{run_id}/")
    top = page.locator("#parity-table tbody tr").first
    assert top.get_attribute("id") == "parity-first"
    assert_leads_with(page, "#parity-first", platform.var_dir, "pages-parity-diverged")
    assert "self.second(x)" in top.inner_text()
    # Every breaking row is marked (the first divergent one is also on top).
    marked = page.locator("#parity-table tr[data-broken]").count()
    assert marked == run["result"]["summary"]["broken_layers"]
    page.close()
