from __future__ import annotations

import pytest

from workers.contract import kinds
from workers.contract.kinds import validate
from workers.contract.spec import SpecError, split_submission


def errors_of(doc: object) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        validate(doc)
    return caught.value.errors


def test_smoke_spec_gets_its_defaults() -> None:
    spec = validate({"kind": "smoke", "device_type": "npu"})
    assert spec == {
        "kind": "smoke",
        "device_type": "npu",
        "devices": 1,
        "timeout_s": 900,
        "python": "",
        "env": {},
        "tensorboard_dirs": [],
        "metric_patterns": [],
        "stdout_metrics": True,
        "hang_timeout_s": 600,
        "on_hang": "fail",
        "stop_on_nan": False,
        "matmul_size": 2048,
        "train_steps": 50,
        "seed": 0,
        "framework": "pytorch",
        "profile": None,
    }


def test_defaults_are_copies_not_shared_objects() -> None:
    first = validate({"kind": "smoke", "device_type": "cpu"})
    first["env"]["X"] = "1"
    assert validate({"kind": "smoke", "device_type": "cpu"})["env"] == {}


def test_every_bad_field_is_named_at_once() -> None:
    errors = errors_of(
        {
            "kind": "smoke",
            "device_type": "tpu",
            "devices": 0,
            "train_steps": "many",
            "colour": "red",
        }
    )
    assert errors == {
        "device_type": "must be one of: cpu, cuda, npu",
        "devices": "must be at least 1",
        "train_steps": "must be an integer",
        "colour": "unknown field for a smoke run",
    }


KINDS = "collectives, coverage, echo, parity, smoke, stability, training"


@pytest.mark.parametrize(
    ("doc", "field", "message"),
    [
        (
            {},
            "kind",
            "this field is required; one of: " + KINDS,
        ),
        (
            {"kind": "fly"},
            "kind",
            "unknown kind 'fly'; one of: " + KINDS,
        ),
        (
            {"kind": 3},
            "kind",
            "unknown kind 3; one of: " + KINDS,
        ),
        ({"kind": "smoke"}, "device_type", "this field is required"),
        ({"kind": "smoke", "device_type": "cpu", "devices": True}, "devices", "must be an integer"),
        ({"kind": "smoke", "device_type": "cpu", "devices": 1.5}, "devices", "must be an integer"),
        ({"kind": "smoke", "device_type": "cpu", "devices": 65}, "devices", "must be at most 64"),
        (
            {"kind": "smoke", "device_type": "cpu", "timeout_s": 0},
            "timeout_s",
            "must be at least 1",
        ),
        (
            {"kind": "smoke", "device_type": "cpu", "env": {"1BAD": "x"}},
            "env",
            "'1BAD' is not a valid environment variable name",
        ),
        (
            {"kind": "smoke", "device_type": "cpu", "env": {"A": 1}},
            "env",
            "value of A must be a string",
        ),
        (
            {"kind": "training", "device_type": "npu", "env": {"ASCEND_RT_VISIBLE_DEVICES": "0"}},
            "env",
            "ASCEND_RT_VISIBLE_DEVICES is set by npulab (spec fields, device lease)",
        ),
        (
            {"kind": "training", "device_type": "cpu", "env": {"NPULAB_CHECKPOINT_DIR": "/x"}},
            "env",
            "NPULAB_CHECKPOINT_DIR is set by npulab (spec fields, device lease)",
        ),
        ({"kind": "smoke", "device_type": "cpu", "python": 3}, "python", "must be a string"),
    ],
)
def test_invalid_values_are_refused_with_the_reason(doc: dict, field: str, message: str) -> None:
    assert errors_of(doc)[field] == message


def test_a_spec_must_be_an_object() -> None:
    assert errors_of(["smoke"]) == {"spec": "must be a JSON object"}


def test_whole_floats_are_accepted_as_integers() -> None:
    assert validate({"kind": "smoke", "device_type": "cpu", "devices": 2.0})["devices"] == 2


def test_submission_fields_are_split_from_the_spec() -> None:
    spec, submission = split_submission(
        {"kind": "smoke", "device_type": "cpu", "host": "npu-01", "priority": 5, "tags": ["a"]}
    )
    assert spec == {"kind": "smoke", "device_type": "cpu"}
    assert submission == {"host": "npu-01", "priority": 5, "tags": ["a"]}


def test_json_schema_matches_the_fields() -> None:
    schema = kinds.get("smoke").json_schema()
    assert schema["required"] == ["kind", "device_type"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["devices"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 64,
        "default": 1,
        "description": "Devices the run leases on each host.",
    }
    assert schema["properties"]["env"]["additionalProperties"] == {"type": "string"}


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("metric_patterns", ["(unclosed"], "is not a regular expression"),
        ("metric_patterns", [r"loss (\d+)"], "needs a named group"),
        ("tensorboard_dirs", ["../elsewhere"], "must not contain '..'"),
        ("stdout_metrics", "yes", "must be true or false"),
    ],
)
def test_capture_fields_say_what_is_wrong(field: str, value: object, reason: str) -> None:
    with pytest.raises(SpecError) as excinfo:
        validate({"kind": "smoke", "device_type": "cpu", field: value})
    assert reason in excinfo.value.errors[field]
