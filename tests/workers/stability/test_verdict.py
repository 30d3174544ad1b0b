"""The verdict and the consistency check as functions: the rules, on hand-made records."""

from __future__ import annotations

import pytest
import torch

from workers.kinds.stability import FaultSyntaxError, consistency, parse_faults, verdict


def records(speeds: list[float], device: int = 0, **overrides: object) -> list[dict]:
    return [
        dict(
            {"interval": i, "device": device, "throughput": s, "consistency": "match"},
            **overrides,
        )
        for i, s in enumerate(speeds, 1)
    ]


def test_steady_throughput_passes() -> None:
    judged = verdict.judge(records([10, 10, 9.8, 10.1]), 10, 50, 95)
    assert (judged["verdict"], judged["reasons"], judged["bad_devices"]) == ("pass", [], [])


def test_a_drop_warns_past_one_threshold_and_fails_past_the_other() -> None:
    warned = verdict.judge(records([10, 10, 8, 10]), 10, 50, 95)
    assert warned["verdict"] == "warn"
    assert warned["bad_devices"] == []
    assert warned["throughput_drop_pct"] == {"0": 20.0}
    failed = verdict.judge(records([10, 10, 4, 10]), 10, 50, 95)
    assert failed["verdict"] == "fail"
    assert failed["cause"] == "throughput_drop"
    assert failed["bad_devices"][0]["device"] == 0


def test_a_hot_device_warns_and_names_its_interval() -> None:
    hot = records([10, 10, 10])
    hot[1]["telemetry"] = {"temperature_c": 97.0}
    judged = verdict.judge(hot, 10, 50, 95)
    assert judged["verdict"] == "warn"
    assert judged["reasons"] == ["device 0 reached 97 °C at interval 2 (limit 95 °C)"]
    assert verdict.judge(hot, 10, 50, 0)["verdict"] == "pass"  # 0: no limit


def test_a_mismatch_fails_before_any_warning_naming_device_and_interval() -> None:
    found = records([10, 10, 8]) + records([10, 10, 10], device=1)
    found[-1]["consistency"] = "mismatch"
    judged = verdict.judge(found, 10, 50, 95)
    assert judged["verdict"] == "fail"
    assert judged["cause"] == "consistency_mismatch"
    assert judged["reasons"][0].startswith("consistency mismatch on device 1 at interval 3")
    assert [bad["device"] for bad in judged["bad_devices"]] == [1]


def test_the_check_tells_bitwise_equal_close_and_corrupt_apart() -> None:
    reference = torch.linspace(-1, 1, 100)
    assert consistency.compare(torch, reference, reference.clone(), 1e-5) == ("match", 0.0)
    nudged = reference.clone()
    nudged[3] += 1e-7
    outcome, error = consistency.compare(torch, reference, nudged, 1e-5)
    assert outcome == "close"
    assert 0 < error < 1e-5
    assert consistency.compare(torch, reference, consistency.perturb(reference), 1e-5)[0] == (
        "mismatch"
    )
    with_nan = reference.clone()
    with_nan[0] = float("nan")
    assert consistency.compare(torch, reference, with_nan, 1e-5)[0] == "mismatch"


def test_across_devices_the_one_that_disagrees_is_named() -> None:
    torch.manual_seed(0)
    result = torch.randn(64)
    references: dict = {}
    first = consistency.check_interval(torch, references, {0: result, 1: result.clone()}, 1e-5)
    assert {d: o["consistency"] for d, o in first.items()} == {0: "match", 1: "match"}
    # Device 0 corrupts its result: it is the mismatch, the healthy device 1 is not.
    later = consistency.check_interval(
        torch, references, {0: consistency.perturb(result), 1: result.clone()}, 1e-5
    )
    assert consistency.mismatched(later) == [0]
    # A device that differs from the others from its very first interval is caught too.
    fresh: dict = {}
    odd = consistency.check_interval(
        torch, fresh, {0: result, 1: result.clone(), 2: consistency.perturb(result)}, 1e-5
    )
    assert consistency.mismatched(odd) == [2]
    assert odd[2]["detail"] == "disagrees with device 0"


def test_faults_parse_and_say_what_they_do() -> None:
    parsed = parse_faults("mismatch:interval=3,device=1; decay:from=2,factor=0.5")
    assert parsed.mismatch(3, 1)
    assert not parsed.mismatch(3, 0)
    assert not parsed.mismatch(2, 1)
    assert parsed.slowdown(1, 0) == 1.0
    assert parsed.slowdown(2, 0) == parsed.slowdown(9, 1) == 0.5
    assert not parse_faults("")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("explode:interval=1", "unknown fault"),
        ("decay:from=2", "needs factor="),
        ("decay:from=2,factor=2", "at most 1"),
        ("error:interval=x", "must be a number"),
        ("mismatch:when=3", "it takes interval=, device="),
    ],
)
def test_a_fault_that_does_not_parse_says_why(text: str, message: str) -> None:
    with pytest.raises(FaultSyntaxError, match=message):
        parse_faults(text)


def test_a_device_that_fails_before_the_first_interval_is_named_with_when() -> None:
    setup = [{"interval": 0, "device": 1, "consistency": "error", "error": "RuntimeError: OOM"}]
    judged = verdict.judge(setup, 10, 50, 95)
    assert judged["cause"] == "device_fault"
    assert judged["reasons"] == ["device 1 failed while its workload was set up: RuntimeError: OOM"]
