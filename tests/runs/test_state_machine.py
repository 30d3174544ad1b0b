from __future__ import annotations

import itertools

import pytest

from npulab.runs.models import InvalidTransition, Run
from workers.contract import exits

S = Run.Status
ALLOWED = {
    (S.QUEUED, S.DISPATCHED),
    (S.QUEUED, S.CANCELLED),
    # No host that could take it came before its queue expiry.
    (S.QUEUED, S.EXPIRED),
    (S.DISPATCHED, S.RUNNING),
    (S.DISPATCHED, S.QUEUED),
    (S.DISPATCHED, S.CANCELLED),
    (S.DISPATCHED, S.LOST),
    (S.RUNNING, S.SUCCEEDED),
    (S.RUNNING, S.FAILED),
    (S.RUNNING, S.CANCELLED),
    (S.RUNNING, S.LOST),
    # A new attempt: automatic after a failure, or a user's restart of an ended run.
    (S.RUNNING, S.QUEUED),
    (S.FAILED, S.QUEUED),
    (S.CANCELLED, S.QUEUED),
    (S.LOST, S.QUEUED),
    (S.EXPIRED, S.QUEUED),
}


@pytest.mark.parametrize(("source", "target"), list(itertools.product(S.values, S.values)))
def test_only_the_documented_transitions_are_allowed(source: str, target: str) -> None:
    run = Run(status=source)
    if (source, target) in ALLOWED:
        run.transition_to(target)
        assert run.status == target
    else:
        with pytest.raises(InvalidTransition):
            run.transition_to(target)
        assert run.status == source


def test_transitions_stamp_their_times() -> None:
    run = Run(status=S.QUEUED)
    run.transition_to(S.DISPATCHED)
    assert run.dispatched_at is not None
    run.transition_to(S.RUNNING)
    assert run.started_at is not None
    assert run.last_heartbeat == run.started_at
    run.transition_to(S.SUCCEEDED)
    assert run.finished_at is not None
    assert not run.is_active


def test_requeue_forgets_the_dispatch_time() -> None:
    run = Run(status=S.QUEUED)
    run.transition_to(S.DISPATCHED)
    run.transition_to(S.QUEUED)
    assert run.dispatched_at is None


def test_a_new_attempt_keeps_the_first_start_and_clears_the_end() -> None:
    run = Run(status=S.DISPATCHED)
    run.transition_to(S.RUNNING)
    first_start = run.started_at
    run.transition_to(S.FAILED)
    run.transition_to(S.QUEUED)
    assert run.finished_at is None
    run.transition_to(S.DISPATCHED)
    run.transition_to(S.RUNNING)
    assert run.started_at == first_start


def test_lost_and_worker_causes_count_as_infrastructure_failures() -> None:
    assert Run(status=S.LOST).infrastructure_failure
    assert Run(status=S.FAILED, exit_cause=exits.START_FAILED).infrastructure_failure
    assert not Run(status=S.FAILED, exit_cause=exits.PROCESS_EXIT).infrastructure_failure
    assert not Run(status=S.FAILED, exit_cause=exits.TIMEOUT).infrastructure_failure
