"""The kind registry: one owner per name, cause and event type; causes nobody declared refused."""

from __future__ import annotations

import pytest

from workers.contract import exits, kinds
from workers.contract.events import EventType
from workers.contract.exits import Cause
from workers.contract.kinds import Kind, KindConflict
from workers.contract.spec import common_fields
from workers.kinds.base import Outcome


def a_kind(name: str = "extra", **declared: object) -> Kind:
    return Kind(name, "a kind of the tests", "tests.nowhere", common_fields(60), **declared)


def test_the_built_in_kinds_are_found_in_their_folders() -> None:
    assert {"smoke", "training"} <= set(kinds.names())
    assert kinds.get("training").runner == "workers.kinds.training.runner"


def test_a_second_kind_of_the_same_name_is_refused() -> None:
    with pytest.raises(KindConflict, match="declared twice"):
        kinds.register(a_kind("smoke"))


def test_a_kind_may_not_take_a_core_cause_or_another_kinds_cause() -> None:
    with pytest.raises(KindConflict, match="timeout"):
        kinds.register(a_kind(causes=(Cause(exits.TIMEOUT, "again"),)))
    with pytest.raises(KindConflict, match="heartbeat_timeout"):
        kinds.register(a_kind(causes=(Cause("heartbeat_timeout", "again"),)))
    assert kinds.get("extra") is None


def test_a_kind_may_not_take_a_core_or_another_kinds_event_type() -> None:
    with pytest.raises(KindConflict, match="metric"):
        kinds.register(a_kind(event_types=(EventType("metric"),)))
    with pytest.raises(KindConflict, match="resume"):
        kinds.register(a_kind(event_types=(EventType("resume"),)))


def test_causes_are_the_core_ones_and_the_kinds_own() -> None:
    causes = kinds.causes()
    assert set(exits.CORE_CAUSES) <= set(causes)
    assert causes["heartbeat_timeout"].infrastructure
    assert causes["heartbeat_timeout"].restartable
    assert not causes[exits.TIMEOUT].restartable


def test_an_outcome_with_a_cause_nobody_declared_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown exit cause 'disk_on_fire'"):
        Outcome(exits.FAILED, "no", cause="disk_on_fire")
    with pytest.raises(ValueError, match="not 'maybe'"):
        Outcome("maybe")
    assert Outcome(exits.FAILED, cause="heartbeat_timeout").cause == "heartbeat_timeout"


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        ({"type": "log", "line": "ok"}, None),
        ({"type": "log"}, "a log event needs 'line'"),
        ({"type": "metric", "key": "loss", "step": 1, "value": None}, None),
        ({"type": "metric", "key": "loss", "step": "1", "value": 1.0}, "metric.step must be"),
        ({"type": "metric", "key": "loss", "step": 10**30, "value": 1.0}, None),
        ({"type": "checkpoint", "step": 1, "bytes": 3, "sha256": "ab"}, None),
        ({"type": "checkpoint", "step": 1.5, "bytes": 3, "sha256": "ab"}, "checkpoint.step"),
        ({"type": "result", "status": "succeeded", "summary": []}, "result.summary must be"),
    ],
)
def test_core_and_capability_event_types_say_what_is_wrong_with_an_event(
    event: dict[str, object], problem: str | None
) -> None:
    # checkpoint is the checkpoints capability's (workers.contract.capabilities), not core.
    found = kinds.event_types()[str(event["type"])].problem(event)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(problem)


def test_a_kind_event_type_is_checked_too() -> None:
    damaged = kinds.event_types()["checkpoint_damaged"]
    assert damaged.problem({"type": "checkpoint_damaged", "step": "x"}) == (
        "checkpoint_damaged.step must be integer"
    )


def test_a_kind_describes_its_fields_for_forms_and_the_cli() -> None:
    described = kinds.get("smoke").describe()
    names = [field["name"] for field in described["fields"]]
    assert names[:4] == ["kind", "device_type", "devices", "timeout_s"]
    device_type = described["fields"][1]
    assert device_type["choices"] == ["cpu", "cuda", "npu"]
    assert device_type["required"] is True


def test_a_kind_gets_its_capabilities_fields_and_may_not_take_their_event_types() -> None:
    from workers.contract.capabilities import CHECKPOINT_DAMAGED, PROFILING

    kind = Kind("kind_with_profiling", "t", "r", [], capabilities=(PROFILING,))
    assert kind.fields[-1].name == "profile"
    assert kind.can(PROFILING)
    with pytest.raises(KindConflict, match="event type 'checkpoint_damaged'"):
        kinds.register(
            Kind("thief", "t", "r", [], event_types=(EventType(CHECKPOINT_DAMAGED, {}, ()),))
        )
    with pytest.raises(KeyError, match="unknown capability 'flying'"):
        Kind("k", "t", "r", [], capabilities=("flying",))
