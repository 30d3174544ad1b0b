"""Coverage runs through ``python -m workers.run``: capture, dtypes, failures, the full matrix."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.workers.coverage.conftest import run_spec
from workers.kinds.coverage import STATUSES

USER_SCRIPT = """
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1000):
    x = torch.randn(4, 8)
    loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("the script ran to its end")
"""


def recorded_ops(run) -> set[str]:
    return {entry["op"] for entry in run.plan["ops"]}


def test_the_builtin_lm_is_captured_and_each_recorded_op_gets_results(tmp_path: Path) -> None:
    run = run_spec({"op_set": "model", "entry": "builtin:lm", "capture_steps": 2}, tmp_path / "run")
    assert run.code == 0, run.stderr
    ops = recorded_ops(run)
    assert {"aten::embedding", "aten::addmm", "aten::native_layer_norm"} <= ops
    assert "aten::embedding_dense_backward" in ops  # the backward pass is recorded too
    for entry in run.plan["ops"]:
        assert entry["count"] >= 1
        assert len(entry["dtypes"]) == len(entry["shapes"])
    assert run.plan["total"] == len(run.rows)
    assert {row["op"] for row in run.rows} == ops
    embedding = [row for row in run.rows if row["op"] == "aten::embedding"]
    assert [(row["variant"], row["dtype"], row["status"]) for row in embedding] == [
        ("default", "float32", "pass")
    ]
    addmm = next(row for row in run.rows if row["op"] == "aten::addmm")
    assert addmm["status"] == "pass"
    assert addmm["detail"]["inputs"] == "recorded"
    # The built-in job's own tracking wrote nowhere in the coverage run.
    types = {event["type"] for event in run.events}
    assert not types & {"metric", "checkpoint"}
    assert not (tmp_path / "run" / "checkpoints").exists()
    assert not (tmp_path / "run" / "capture").exists()


def test_an_unmodified_user_script_is_captured_until_its_steps(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(USER_SCRIPT))
    run = run_spec({"op_set": "model", "entry": str(script), "capture_steps": 3}, tmp_path / "run")
    assert run.code == 0, run.stderr
    ops = recorded_ops(run)
    assert {"aten::addmm", "aten::tanh", "aten::tanh_backward", "aten::mm"} <= ops
    # Stopped after 3 steps: the script never reached its own end.
    assert not any("the script ran to its end" in e.get("line", "") for e in run.of("log"))
    assert any("after 3 optimizer step(s)" in e.get("line", "") for e in run.of("log"))
    assert run.plan["total"] == len(run.rows)
    assert {row["op"] for row in run.rows} == ops
    assert run.result["summary"]["pass"] >= len(run.rows) - 2


def test_a_script_that_fails_before_any_op_fails_the_capture(tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("raise ValueError('no data here')\n")
    run = run_spec({"op_set": "model", "entry": str(script)}, tmp_path / "run")
    assert run.code == 1
    assert (run.result["cause"], run.result["reason"]) == (
        "capture_failed",
        "ValueError: no data here",
    )


def test_a_listed_dtype_the_op_does_not_claim_gets_a_row(tmp_path: Path) -> None:
    # The CPU implements no cholesky for integers, and no relu for bool.
    run = run_spec(
        {
            "op_set": "list",
            "ops": ["linalg.cholesky", "abs", "nn.functional.relu", "no_such_op"],
            "dtypes": ["float32", "int32", "bool"],
        },
        tmp_path / "run",
    )
    assert run.code == 0, run.stderr
    assert run.plan["total"] == len(run.rows) == 12
    # Refused in its own words, in a dtype it does not claim: unsupported, not an error.
    relu = run.row("nn.functional.relu", "bool")
    assert relu["status"] == "unsupported"
    assert relu["error"] == "RuntimeError: Boolean inputs not supported for relu"
    cholesky = run.row("linalg.cholesky", "int32")
    assert cholesky["status"] == "unsupported"
    assert "not implemented for 'Int'" in cholesky["error"]
    assert cholesky["detail"]["claimed"] is False
    assert run.row("linalg.cholesky", "float32")["status"] == "pass"
    assert run.row("abs", "int32")["status"] == "pass"
    unknown = run.row("no_such_op", "int32")
    assert unknown["status"] == "error"
    assert "not in the operator database" in unknown["error"]


def test_without_expecttest_the_run_fails_saying_what_to_install(tmp_path: Path) -> None:
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['expecttest'] = None\n")
    from tests.paths import REPO_DIR

    run = run_spec({"op_set": "opinfo"}, tmp_path / "run", PYTHONPATH=f"{hide}:{REPO_DIR}")
    assert run.code == 1
    assert run.result["cause"] == "op_db_unavailable"
    assert run.result["reason"] == (
        "No module named 'expecttest': install it in the run's interpreter: pip install expecttest"
    )


def test_a_device_stack_that_does_not_load_fails_with_its_text(tmp_path: Path) -> None:
    run = run_spec({"device_type": "npu", "op_set": "list", "ops": ["add"]}, tmp_path / "run")
    assert run.code == 1
    assert run.result["reason"].startswith("import torch_npu failed")


def test_the_full_opinfo_matrix_in_every_claimed_cpu_dtype(tmp_path: Path) -> None:
    run = run_spec({"op_set": "opinfo"}, tmp_path / "run")
    assert run.code == 0, run.stderr
    summary = run.result["summary"]
    assert run.plan["total"] == len(run.rows) == summary["total"] > 5000
    assert sum(summary[status] for status in STATUSES) == summary["total"]
    for status in STATUSES:
        assert summary[status] == sum(1 for row in run.rows if row["status"] == status)
    keys = {(row["op"], row["variant"], row["dtype"], row["pass"]) for row in run.rows}
    assert len(keys) == len(run.rows)  # one row per op × variant × dtype × pass
    assert summary["crash"] == summary["timeout"] == 0
    assert summary["pass_rate"] > 0.95


def test_gradients_are_rows_of_their_own_and_all_samples_can_be_run(tmp_path: Path) -> None:
    run = run_spec(
        {
            "op_set": "list",
            "ops": ["add", "nn.functional.relu", "sort"],
            "dtypes": ["float32", "int32"],
            "backward": True,
            "samples": "all",
        },
        tmp_path / "run",
    )
    assert run.code == 0, run.stderr
    backward = {(row["op"], row["dtype"]) for row in run.rows if row["pass"] == "backward"}
    # Integers have no gradient: their cells are forward only.
    assert backward == {("add", "float32"), ("nn.functional.relu", "float32"), ("sort", "float32")}
    assert run.plan["total"] == len(run.rows) == 6 + 3
    add = run.row("add", "float32", "backward")
    assert add["status"] == "pass"
    assert add["samples"] > 1  # every sample input OpInfo has for add, not the first only
    assert run.row("add", "float32")["samples"] == add["samples"]


def test_an_empty_sample_never_decides_and_unclaimed_dtypes_that_work_say_so(
    tmp_path: Path,
) -> None:
    # Before: linalg.svd in float16 and bfloat16 and searchsorted in bool and complex64
    # "passed" on the CPU: their only sample tried was empty, so the kernel's dtype
    # dispatch never ran, and a real input raises "not implemented for 'Half'".
    run = run_spec(
        {
            "op_set": "list",
            "ops": ["linalg.svd", "searchsorted", "cumsum", "nn.functional.embedding"],
            "dtypes": ["float32", "float16", "bfloat16", "bool", "complex64", "int64"],
        },
        tmp_path / "run",
    )
    assert run.code == 0, run.stderr
    for op, dtype in (
        ("linalg.svd", "float16"),
        ("linalg.svd", "bfloat16"),
        ("searchsorted", "bool"),
        ("searchsorted", "complex64"),
    ):
        assert run.row(op, dtype)["status"] not in ("pass", "unclaimed"), (op, dtype)
    # Works although OpInfo does not claim it: its own status, never a plain pass.
    assert run.row("cumsum", "bool")["status"] == "unclaimed"
    assert run.row("linalg.svd", "float32")["status"] == "pass"
    for row in run.rows:
        if row["status"] == "pass":
            assert row["detail"].get("claimed", True), row
        if row["status"] == "untested":
            assert "no elements" in row["error"]
