"""The parity kind's declaration: what a spec's sides may ask, and where they run."""

from __future__ import annotations

import pytest

from workers.contract.kinds import get, validate
from workers.contract.spec import SpecError

BASE = {"kind": "parity", "device_type": "cpu", "entry": "builtin:mlp"}


def refused(**fields: object) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        validate({**BASE, **fields})
    return caught.value.errors


def test_sides_on_one_host_ask_for_no_placements_of_their_own() -> None:
    spec = validate({**BASE, "b": {"dtype": "bfloat16"}})
    assert (spec["b"]["host"], spec["b"]["pool"], spec["b"]["labels"]) == ("", "", [])
    assert get("parity").placements(spec) == []


def test_a_side_naming_a_host_pool_or_labels_puts_each_side_on_a_host_of_its_own() -> None:
    spec = validate(
        {**BASE, "a": {"labels": ["reference"]}, "b": {"host": "npu-9", "device_type": "npu"}}
    )
    assert get("parity").placements(spec) == [
        {
            "field": "b",
            "role": "side b",
            "device_type": "npu",
            "host": "npu-9",
            "pool": "",
            "labels": [],
        },
        {
            "field": "a",
            "role": "side a",
            "device_type": "",
            "host": "",
            "pool": "",
            "labels": ["reference"],
        },
    ]


def test_another_device_type_needs_a_host_of_its_own_and_errors_name_the_sides_key() -> None:
    errors = refused(b={"device_type": "npu"})
    assert set(errors) == {"b.device_type"}
    assert "unless the sides name hosts of their own" in errors["b.device_type"]
    assert set(refused(a={"amp_level": "O1"})) == {"a.amp_level"}
    assert refused(b={"labels": "ascend"}) == {"b.labels": "must be a list of strings"}
    assert refused(b={"hots": "x"}) == {"b.hots": "unknown field for a side b of a parity run"}


def test_dumps_that_exist_are_compared_on_one_host() -> None:
    errors = refused(entry="", dump_a="/d/a/step0", dump_b="/d/b/step0", b={"pool": "gpu"})
    assert errors == {"b.pool": errors["b.pool"]}
    assert "compared on one host" in errors["b.pool"]
