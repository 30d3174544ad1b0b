"""The framework fields of a training spec: defaults, invalid combinations, host labels."""

from __future__ import annotations

import pytest

from workers.contract import kinds
from workers.contract.spec import SpecError


def training(**fields) -> dict:
    return {"kind": "training", "device_type": "cpu", "entry": "builtin:cnn", **fields}


def test_a_training_run_is_pytorch_unless_it_says_otherwise() -> None:
    spec = kinds.validate(training())
    assert (spec["framework"], spec["mode"], spec["amp_level"], spec["save_graphs"]) == (
        "pytorch",
        "pynative",
        "O0",
        0,
    )
    assert kinds.get("training").host_labels(spec) == []


def test_a_mindspore_run_needs_a_host_with_mindspore() -> None:
    spec = kinds.validate(training(framework="mindspore", mode="graph", save_graphs=2))
    assert kinds.get("training").host_labels(spec) == ["mindspore"]


@pytest.mark.parametrize("manager", ["auto", "dynamic"])
def test_o2_on_a_cpu_with_a_loss_scale_manager_is_refused(manager: str) -> None:
    with pytest.raises(SpecError) as refused:
        kinds.validate(training(framework="mindspore", amp_level="O2", loss_scale_manager=manager))
    assert (
        "MindSpore refuses a loss scale manager on CPU"
        in refused.value.errors["loss_scale_manager"]
    )


@pytest.mark.parametrize("manager", ["none", "fixed"])
def test_o2_on_a_cpu_without_a_dynamic_manager_is_accepted(manager: str) -> None:
    kinds.validate(training(framework="mindspore", amp_level="O2", loss_scale_manager=manager))


def test_o2_on_an_npu_keeps_its_dynamic_default() -> None:
    kinds.validate(training(device_type="npu", framework="mindspore", amp_level="O2"))


@pytest.mark.parametrize(
    ("field", "value"), [("mode", "graph"), ("amp_level", "O1"), ("save_graphs", 1)]
)
def test_mindspore_fields_on_a_pytorch_run_are_refused(field: str, value: object) -> None:
    with pytest.raises(SpecError) as refused:
        kinds.validate(training(**{field: value}))
    why = "applies to framework mindspore only (this run is pytorch)"
    assert refused.value.errors[field] == why


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("framework", "jax"),
        ("mode", "eager"),
        ("amp_level", "O4"),
        ("save_graphs", 4),
        ("save_graphs", -1),
        ("save_graphs_max_mb", 0),
        ("checkpoint_dir", "../elsewhere"),
    ],
)
def test_bad_values_name_their_field(field: str, value: object) -> None:
    with pytest.raises(SpecError) as refused:
        kinds.validate(training(**{"framework": "mindspore", field: value}))
    assert field in refused.value.errors
