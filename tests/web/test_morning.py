"""The dashboard's morning view: what runs, what failed and why, the queue, the stacks."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from npulab.runs.models import Run
from npulab.runs.services import do_submit_run
from npulab.web import morning
from tests.factories import RunFactory

SMOKE = {"kind": "smoke", "device_type": "cpu"}


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def _ended(owner, status: str, cause: str, reason: str, hours_ago: float, **fields) -> Run:
    now = timezone.now()
    return RunFactory(
        submitted_by=owner,
        status=status,
        exit_cause=cause,
        exit_reason=reason,
        started_at=now - timedelta(hours=hours_ago, minutes=5),
        finished_at=now - timedelta(hours=hours_ago),
        **fields,
    )


@pytest.mark.django_db
def test_failures_are_grouped_by_cause_largest_first_within_the_day(owner) -> None:
    _ended(owner, "failed", "oom", "NPU out of memory", 1)
    _ended(owner, "failed", "oom", "NPU out of memory again", 2)
    _ended(owner, "lost", "host_lost", "host stopped answering", 3)
    _ended(owner, "failed", "oom", "yesterday's", 30)  # outside the window
    _ended(owner, "succeeded", "", "", 1)

    groups = morning.failures(Run.objects.all())

    assert [(group.category, group.count) for group in groups] == [("oom", 2), ("host_lost", 1)]
    assert [run.exit_reason for run in groups[0].runs] == [
        "NPU out of memory",
        "NPU out of memory again",
    ]


@pytest.mark.django_db
def test_a_large_group_shows_a_few_runs_and_counts_all(owner) -> None:
    for hour in range(morning.SHOWN_FAILURES_PER_GROUP + 3):
        _ended(owner, "failed", "exit_code", f"exit {hour}", hour * 0.1)

    (group,) = morning.failures(Run.objects.all())

    assert group.count == morning.SHOWN_FAILURES_PER_GROUP + 3
    assert len(group.runs) == morning.SHOWN_FAILURES_PER_GROUP


@pytest.mark.django_db
def test_the_queue_names_the_run_waiting_longest(owner) -> None:
    now = timezone.now()
    newer = RunFactory(submitted_by=owner, queue_reason="no idle cpu host")
    older = RunFactory(submitted_by=owner, queue_reason="needs 2 × npu; 0 idle")
    # created is auto_now_add: set it after the fact, as time would have.
    Run.objects.filter(pk=older.pk).update(created=now - timedelta(minutes=50))
    Run.objects.filter(pk=newer.pk).update(created=now - timedelta(minutes=5))

    queue = morning.queue_wait(Run.objects.all(), now=now)

    assert queue.queued == 2
    assert queue.oldest.pk == older.pk
    assert queue.oldest_wait_s == pytest.approx(50 * 60, abs=1)


@pytest.mark.django_db
def test_an_empty_queue_has_no_wait(owner) -> None:
    queue = morning.queue_wait(Run.objects.all())
    assert (queue.queued, queue.p50_wait_s, queue.oldest) == (0, None, None)


@pytest.mark.django_db
def test_queue_wait_is_the_median_of_the_days_dispatches(owner) -> None:
    now = timezone.now()
    for wait_s in (10, 20, 600):
        run = RunFactory(submitted_by=owner, status="succeeded", dispatched_at=now)
        Run.objects.filter(pk=run.pk).update(created=now - timedelta(seconds=wait_s))
    old = RunFactory(submitted_by=owner, status="succeeded", dispatched_at=now - timedelta(days=2))
    Run.objects.filter(pk=old.pk).update(created=now - timedelta(days=3))  # not today's queue
    assert morning.queue_wait(Run.objects.all(), now=now).p50_wait_s == pytest.approx(20, abs=1)


@pytest.mark.django_db
def test_in_progress_lists_running_runs_longest_running_first(owner, cpu_host) -> None:
    now = timezone.now()
    late = RunFactory(submitted_by=owner, status="running", host=cpu_host, started_at=now)
    early = RunFactory(
        submitted_by=owner, status="running", host=cpu_host, started_at=now - timedelta(hours=2)
    )
    RunFactory(submitted_by=owner)  # queued: not in progress

    shown = [item.run.pk for item in morning.in_progress(Run.objects.all())]

    assert shown == [early.pk, late.pk]


@pytest.mark.django_db
def test_the_dashboard_page_leads_with_the_morning_view(browser: Client, owner, cpu_host) -> None:
    queued = do_submit_run(owner, {**SMOKE, "name": "nightly"})
    _ended(owner, "failed", "oom", "NPU out of memory: tried to allocate 2 GiB", 1)

    page = browser.get("/").content.decode()

    assert "Running now" in page
    assert "Nothing is running." in page
    assert 'data-category="oom"' in page
    assert "tried to allocate 2 GiB" in page
    assert f'id="queue-oldest" data-run="{queued.pk}"' in page
    assert "cpu-01" in page
    fragment = browser.get("/", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in fragment
    assert 'id="failures"' in fragment


@pytest.mark.django_db
def test_a_diagnosed_failure_is_grouped_by_its_root_cause_not_its_wrapper(owner) -> None:
    diagnosed = {"category": "oom", "line": "EL0004: FAIL_ALLOC_MEM", "codes": ["EL0004"]}
    for _ in range(2):
        _ended(owner, "failed", "process_exit", "aclrtMemcpy failed 507899", 1, diagnosis=diagnosed)
    _ended(owner, "failed", "process_exit", "exit 1", 2)

    groups = morning.failures(Run.objects.all())

    assert [(group.category, group.count) for group in groups] == [
        ("oom", 2),
        ("process_exit", 1),
    ]
    assert groups[0].label.startswith("oom: ")
