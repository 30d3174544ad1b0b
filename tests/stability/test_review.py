"""The upgrade review on real snapshots: the stability verdicts under both stacks."""

from __future__ import annotations

import pytest

from npulab.review.review import CAUTION, NO_GO, review
from npulab.snapshots.services import do_record_snapshot
from tests.factories import HostFactory
from tests.stability.builders import stability_run, verdict

pytestmark = pytest.mark.django_db


@pytest.fixture
def stacks(cpu_host, document):
    current = do_record_snapshot(cpu_host, document(torch="2.1.0", cann="8.0.RC3")).snapshot
    host = HostFactory(name="staging-01")
    target = do_record_snapshot(
        host, document(torch="2.5.1", cann="8.1.RC1", hostname="staging-01")
    ).snapshot
    return current, target


def passed(snapshot, name: str = "pass", *reasons: str, **numbers: float):
    return stability_run(snapshot=snapshot, summary=verdict(name, *reasons, **numbers))


def test_a_worse_verdict_under_the_target_is_shown_beside_the_current_one(stacks) -> None:
    current, target = stacks
    passed(current, throughput=4.0, worst_drop_pct=2.0)
    passed(target, "warn", "device 0 reached 97 °C at interval 9", throughput=4.1)
    result = review(current, target=target)
    row = next(row for row in result.outcomes if row["kind"] == "stability")
    changes = {delta["key"]: delta for delta in row["deltas"] if delta.get("basis") == "newest"}
    assert (changes["verdict"]["current"], changes["verdict"]["target"]) == ("pass", "warn")
    assert changes["verdict"]["worse"]
    assert result.decision == CAUTION
    assert "stability verdict: pass → warn under the target" in result.reasons


def test_a_failed_verdict_under_the_target_is_a_no_go(stacks) -> None:
    current, target = stacks
    passed(current)
    failed = stability_run(
        status="failed",
        snapshot=target,
        summary=verdict("fail", "consistency mismatch on device 0 at interval 3", bad=(0,)),
        exit_cause="consistency_mismatch",
    )
    result = review(current, target=target)
    assert result.decision == NO_GO
    assert f"the last stability run under the target failed (run #{failed.pk})" in result.reasons
