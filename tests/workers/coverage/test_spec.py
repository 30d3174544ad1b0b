"""A coverage spec names what its op set needs, and refuses what that op set would ignore."""

from __future__ import annotations

import pytest

from workers.contract.kinds import validate
from workers.contract.spec import SpecError


@pytest.mark.parametrize(
    ("fields", "errors"),
    [
        ({"op_set": "list"}, {"ops": "op_set list needs the op names to test"}),
        ({"ops": ["add"]}, {"ops": "only op_set list takes op names"}),
        ({"op_set": "model"}, {"entry": "op_set model needs the entry whose ops are recorded"}),
        ({"entry": "train.py"}, {"entry": "only op_set model runs an entry"}),
        (
            {"op_set": "model", "entry": "builtin:lm", "include": ["add"], "backward": True},
            {
                "include": "op_set model tests the ops the entry called; filter with dtypes",
                "backward": "op_set model records the backward ops and tests them as ops",
            },
        ),
        ({"dtypes": ["float32", "fp8"]}, {"dtypes": "unknown dtype(s) fp8; known: float64, "}),
        ({"op_set": "model", "entry": "train"}, {"entry": "must be a script path ending in .py"}),
    ],
)
def test_an_op_set_gets_the_fields_it_needs(fields: dict, errors: dict) -> None:
    with pytest.raises(SpecError) as raised:
        validate({"kind": "coverage", "device_type": "cpu", **fields})
    assert set(raised.value.errors) == set(errors)
    for field, message in errors.items():
        assert raised.value.errors[field].startswith(message)


def test_the_defaults_are_the_whole_operator_database_in_claimed_dtypes() -> None:
    spec = validate({"kind": "coverage", "device_type": "npu"})
    assert (spec["op_set"], spec["dtypes"], spec["samples"], spec["backward"]) == (
        "opinfo",
        [],
        "first",
        False,
    )
