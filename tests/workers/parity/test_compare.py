"""msprobe's rows judged by npulab's thresholds, and the call site of a row (no msprobe)."""

from __future__ import annotations

import math

from workers.kinds.parity import loss_parity
from workers.kinds.parity.compare import judge, number, script_frames, stack_of

THRESHOLDS = {"cosine_min": 0.99, "max_rel_err": 1.0, "thousandth_ratio_min": 0.99}


def row(**cells: object) -> dict:
    base = {
        "NPU Name": "Functional.linear.0.forward.output.0",
        "Bench Name": "Functional.linear.0.forward.output.0",
        "NPU Dtype": "torch.bfloat16",
        "Bench Dtype": "torch.float32",
        "NPU Tensor Shape": "[8, 16]",
        "Bench Tensor Shape": "[8, 16]",
        "Cosine": "0.999",
        "MaxAbsErr": "0.01",
        "MaxRelativeErr": "0.5",
        "One Thousandth Err Ratio": "0.995",
        "Five Thousandths Err Ratio": "1.0",
        "Result": "pass",
    }
    base.update(cells)
    return base


def test_a_close_row_breaks_nothing_and_keeps_its_numbers() -> None:
    judged = judge(row(), THRESHOLDS)
    assert judged["broken"] == []
    assert (judged["cosine"], judged["max_rel_err"]) == (0.999, 0.5)
    assert judged["dtype_b"] == "torch.bfloat16"


def test_msprobes_pass_is_no_verdict_each_threshold_is_npulabs() -> None:
    judged = judge(
        row(Cosine="0.33", MaxRelativeErr="7", **{"One Thousandth Err Ratio": "0.1"}), THRESHOLDS
    )
    assert judged["broken"] == ["cosine", "max_rel_err", "thousandth_ratio"]


def test_nan_shape_and_missing_are_findings_not_errors() -> None:
    nan = judge(row(Cosine="nan", MaxAbsErr="inf"), THRESHOLDS)
    assert nan["nan"]
    assert "nan" in nan["broken"]
    assert nan["cosine"] is None
    assert nan["max_abs_err"] is None
    shape = judge(row(**{"NPU Tensor Shape": "[8, 24]", "Cosine": "N/A"}), THRESHOLDS)
    assert shape["broken"] == ["shape"]
    missing = judge(row(**{"Bench Name": "N/A"}), THRESHOLDS)
    assert missing["broken"] == ["missing"]


def test_statistics_rows_give_their_percentages_as_fractions() -> None:
    assert number("12.5%") == 0.125
    assert number("N/A") is None
    assert math.isnan(number("nan"))
    judged = judge(
        row(Cosine=None, MaxRelativeErr="150%", **{"Max diff": "-0.3"}), THRESHOLDS, statistics=True
    )
    assert judged["max_abs_err"] == 0.3
    assert judged["broken"] == ["max_rel_err"]


def test_a_row_has_the_stack_of_its_call_at_any_level() -> None:
    stacks = {
        "Functional.linear.1.forward": ["model.py:25 in forward: x = self.second(x)"],
        "Module.second.Linear.forward.0": ["model.py:25 in forward: module"],
    }
    assert (
        stack_of(stacks, "Functional.linear.1.forward.input.1")
        == stacks["Functional.linear.1.forward"]
    )
    assert (
        stack_of(stacks, "Functional.linear.1.backward.output.0")
        == stacks["Functional.linear.1.forward"]
    )
    assert (
        stack_of(stacks, "Module.second.Linear.forward.0.parameters.weight")
        == stacks["Module.second.Linear.forward.0"]
    )
    assert (
        stack_of(stacks, "Module.second.Linear.backward.0.input.0")
        == stacks["Module.second.Linear.forward.0"]
    )
    assert stack_of(stacks, "Torch.relu.0.forward.input.0") == []


def test_the_scripts_frames_are_kept_and_the_libraries_dropped() -> None:
    frames = [
        "/venv/site-packages/torch/nn/modules/linear.py:134 in forward: F.linear(...)",
        "/srv/model.py:25 in forward: x = self.second(x)",
        "/srv/helpers.py:3 in build: y",
    ]
    assert script_frames(frames, "model.py") == [frames[1]]
    assert script_frames(frames) == frames[1:]


def test_loss_parity_names_the_first_step_past_the_tolerance() -> None:
    found = loss_parity({0: 1.0, 1: 0.5, 2: 0.25}, {0: 1.0, 1: 0.5001, 2: 0.3, 3: 0.1}, 1e-3)
    assert found["steps"] == 3
    assert found["first_step_past_tolerance"] == 2
    assert found["max_rel_diff"] == (0.3 - 0.25) / 0.25
    assert found["only_b"] == 1
    nan = loss_parity({0: 1.0}, {0: None}, 1.0)
    assert (nan["first_step_past_tolerance"], nan["max_rel_diff"]) == (0, None)
