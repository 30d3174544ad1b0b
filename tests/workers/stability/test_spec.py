"""The stability spec: presets, overrides and the errors that name their field."""

from __future__ import annotations

import pytest

from workers.contract import kinds
from workers.contract.spec import SpecError
from workers.kinds.stability import plan

BASE = {"kind": "stability", "device_type": "cpu"}


def errors_of(**fields: object) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        kinds.validate(dict(BASE, **fields))
    return caught.value.errors


def test_the_defaults_are_the_quick_preset_of_matmul() -> None:
    spec = kinds.validate(BASE)
    assert (spec["preset"], spec["workload"], spec["dtype"]) == ("quick", "matmul", "float32")
    assert plan(spec) == (60.0, 5.0, 12)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"preset": "medium"}, (900.0, 30.0, 30)),
        ({"preset": "long"}, (14400.0, 60.0, 240)),
        ({"duration_s": 10, "interval_s": 3}, (10.0, 3.0, 4)),
        ({"duration_s": 2, "interval_s": 5}, (2.0, 2.0, 1)),
    ],
)
def test_a_preset_and_the_overrides_plan_the_intervals(fields: dict, expected: tuple) -> None:
    assert plan(kinds.validate(dict(BASE, **fields))) == expected


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"preset": "forever"}, "preset", "must be one of: quick, medium, long"),
        ({"workload": "builtin:lm"}, "workload", "package.module:function"),
        ({"workload": "script.py"}, "workload", "package.module:function"),
        ({"workload": "not a name"}, "workload", "package.module:function"),
        ({"dtype": "int8"}, "dtype", "must be one of"),
        ({"duration_s": -1}, "duration_s", "at least 0"),
        ({"preset": "long", "timeout_s": 3600}, "duration_s", "timeout_s (3600) must leave"),
        ({"warn_drop_pct": 60, "fail_drop_pct": 40}, "warn_drop_pct", "not be above fail_drop_pct"),
        ({"interval_s": 0.001, "duration_s": 3600}, "interval_s", "at most 100000"),
        ({"thresholds": {"x": 1}}, "thresholds", "unknown field"),
        ({"faults": "mismatch:interval=two"}, "faults", "interval must be a number"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_field(fields: dict, field: str, message: str) -> None:
    errors = errors_of(**fields)
    assert field in errors, errors
    assert message in errors[field], errors


def test_a_user_entry_is_a_module_and_function() -> None:
    assert kinds.validate(dict(BASE, workload="my.pkg:burn"))["workload"] == "my.pkg:burn"
