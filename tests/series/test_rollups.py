"""A run's rollup blocks stay equal to the points they cover, and charts read them right."""

from __future__ import annotations

import math
import random

import pytest
from django.db.models import Count, QuerySet, Sum

from npulab.runs.models import Run
from npulab.runs.scheduler import place_queued_runs
from npulab.runs.services import do_claim_run, do_finish_run, do_ingest_events, do_submit_run
from npulab.series.ingest import drop_points_after, insert_points
from npulab.series.models import MetricChunk, MetricRollupSegment, MetricSeries
from npulab.series.owners import Owner
from npulab.series.reads import series
from npulab.series.rollups import SEGMENT, SIZES
from tests.conftest import register
from tests.factories import HostFactory
from tests.series.blocks import expected_blocks, stored_blocks, stored_points

pytestmark = pytest.mark.django_db
TRAINING = {"kind": "training", "device_type": "cpu", "entry": "builtin:cnn", "max_restarts": 1}


def started(owner, host) -> Run:
    run = do_submit_run(owner, TRAINING)
    place_queued_runs()
    return do_claim_run(host, run.pk, 1)


def metric(key: str, step: int, value: float) -> dict:
    return {"type": "metric", "time": 1.0, "key": key, "step": step, "value": value}


def send(host, run: Run, events: list[dict]) -> None:
    offset = Run.objects.get(pk=run.pk).events_offset
    do_ingest_events(host, run.pk, run.attempt, offset, offset + 1, events)


def of_run(run: Run) -> QuerySet[MetricSeries]:
    return MetricSeries.objects.filter(run=run)


def noisy_batches(rng: random.Random, steps: range, batch: int) -> list[list[dict]]:
    """Points of two keys in shuffled batches, with NaNs, repeats and a few late steps."""
    events = []
    for step in steps:
        events.append(metric("loss", step, rng.uniform(-5, 5)))
        if step % 7 == 0:
            events.append(metric("loss", step, rng.uniform(-5, 5)))  # logged twice
        if step % 3 == 0:
            value = math.nan if step % 11 == 0 else rng.random()
            events.append(metric("lr", step, value))
    rng.shuffle(events)
    return [events[i : i + batch] for i in range(0, len(events), batch)]


def test_blocks_equal_the_points_through_batches_and_a_resume(owner, cpu_host) -> None:
    rng = random.Random(7)
    run = started(owner, cpu_host)
    for batch in noisy_batches(rng, range(-15, 2600), 700):
        send(cpu_host, run, batch)
    assert stored_blocks(of_run(run)) == expected_blocks(of_run(run))

    send(
        cpu_host,
        run,
        [{"type": "result", "time": 1.0, "status": "failed", "cause": "process_exit"}],
    )
    run = do_finish_run(cpu_host, run.pk, 1, {"exit_code": 1})
    place_queued_runs()
    run = do_claim_run(cpu_host, run.pk, 2)
    # The new attempt resumes mid-block and logs the rest again.
    send(cpu_host, run, [{"type": "resume", "time": 2.0, "step": 1234, "path": "/x"}])
    assert stored_blocks(of_run(run)) == expected_blocks(of_run(run))
    assert max(step for _, _, step, *_ in stored_points(of_run(run))) == 1234
    for batch in noisy_batches(rng, range(1235, 3100), 900):
        send(cpu_host, run, batch)
    assert stored_blocks(of_run(run)) == expected_blocks(of_run(run))

    counts = {
        key: (len(stored_points(of_run(run).filter(key=key))), last)
        for key, last in MetricSeries.objects.filter(run=run).values_list("key", "last_step")
    }
    assert counts == {"loss": (counts["loss"][0], 3099), "lr": (counts["lr"][0], 3099)}
    assert dict(MetricSeries.objects.filter(run=run).values_list("key", "points")) == {
        key: count for key, (count, _) in counts.items()
    }


def test_a_resume_before_every_point_empties_the_series(owner, cpu_host) -> None:
    run = started(owner, cpu_host)
    send(cpu_host, run, [metric("loss", step, 1.0) for step in range(100, 120)])
    send(cpu_host, run, [{"type": "resume", "time": 2.0, "step": 5, "path": "/x"}])
    assert list(MetricSeries.objects.filter(run=run).values_list("points", "last_step")) == [
        (0, None)
    ]
    assert not MetricRollupSegment.objects.filter(series__run=run).exists()
    assert series(Owner.of_run(run.pk), "loss", 10)["points"] == []


def test_a_long_series_charts_from_blocks_with_its_spike(owner, cpu_host) -> None:
    run = started(owner, cpu_host)
    events = [metric("loss", step, 1.0) for step in range(50_000)]
    events[31_337]["value"] = 500.0
    send(cpu_host, run, events)

    body = series(Owner.of_run(run.pk), "loss", 1000)

    assert (body["total"], body["downsampled"]) == (50_000, True)
    assert 500 <= len(body["points"]) <= 1000
    assert [point[0] for point in body["points"]] == sorted(point[0] for point in body["points"])
    spikes = [point for point in body["points"] if point[3] == 500.0]
    assert len(spikes) == 1
    assert spikes[0][0] <= 31_337
    assert all(point[2] == 1.0 for point in body["points"])


def test_deleting_a_run_deletes_its_points_and_blocks(owner, cpu_host) -> None:
    run = started(owner, cpu_host)
    send(cpu_host, run, [metric("loss", step, 1.0) for step in range(2500)])
    kept = started(owner, register(HostFactory(name="cpu-02")))
    send(kept.host, kept, [metric("loss", step, 2.0) for step in range(30)])

    Run.objects.get(pk=run.pk).delete()

    assert set(MetricChunk.objects.values_list("series__run", flat=True)) == {kept.pk}
    assert set(MetricRollupSegment.objects.values_list("series__run", flat=True)) == {kept.pk}


def test_a_series_blocks_are_stored_a_segment_to_a_row(owner, cpu_host) -> None:
    run = started(owner, cpu_host)
    for first in range(0, 30_000, 1000):
        send(cpu_host, run, [metric("loss", step, 1.0) for step in range(first, first + 1000)])

    stored = (
        MetricRollupSegment.objects.filter(series__run=run)
        .values("size")
        .annotate(rows=Count("id"), blocks=Sum("blocks"))
    )
    # 3,000 blocks of 10 steps in rows of SEGMENT, each row a span of SEGMENT blocks' steps.
    assert {row["size"]: (row["rows"], row["blocks"]) for row in stored} == {
        size: (math.ceil(30_000 / (size * SEGMENT)), 30_000 // size) for size in SIZES
    }
    assert stored_blocks(of_run(run)) == expected_blocks(of_run(run))


@pytest.mark.parametrize("resumed_at", [1234, None])
def test_a_cut_back_keeps_what_the_new_attempt_sent_first(owner, cpu_host, resumed_at) -> None:
    """A run across hosts: another host's ranks' points of attempt 2 may come before rank
    0's resume; the cut takes the lost attempt's points only, and the blocks follow."""
    rng = random.Random(11)
    run = started(owner, cpu_host)
    for batch in noisy_batches(rng, range(2000), 700):
        send(cpu_host, run, batch)
    owner_of = Owner.of_run(run.pk)
    insert_points(
        owner_of, {"loss@rank3": [(s, rng.random(), 2.0) for s in range(1500)]}, attempt=1
    )
    # Attempt 2's first points from the other host, from step 1235 on (or 0: no checkpoint).
    first = 1235 if resumed_at is not None else 0
    again = [(s, rng.random(), 3.0) for s in range(first, first + 300)]
    insert_points(owner_of, {"loss@rank3": again}, attempt=2)
    drop_points_after(owner_of, resumed_at, keep_attempt=2)
    ranked = series(owner_of, "loss@rank3")["points"]
    kept_before = [] if resumed_at is None else list(range(resumed_at + 1))
    assert [step for step, _ in ranked] == sorted(kept_before + [s for s, _, _ in again])
    assert max((step for step, _ in series(owner_of, "loss")["points"]), default=None) == resumed_at
    assert stored_blocks(of_run(run)) == expected_blocks(of_run(run))
    assert dict(of_run(run).values_list("key", "points"))["loss@rank3"] == len(ranked)
