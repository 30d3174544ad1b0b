"""A run's points in chunks: read back whole or by pages exactly as they were logged, in step
order, however the batches overlapped."""

from __future__ import annotations

import math
import random

import pytest

from npulab.series import chunks
from npulab.series.chunks import LAST, MAX_POINTS
from npulab.series.ingest import Point, drop_points_after, insert_points
from npulab.series.models import MetricChunk, MetricSeries
from npulab.series.owners import Owner
from npulab.series.reads import find, recent, whole
from npulab.series.rollups import LOWEST_STEP, SIZES
from tests.factories import RunFactory
from tests.series.blocks import expected_blocks, stored_blocks

pytestmark = pytest.mark.django_db


def logged(rng: random.Random, batches: int, size: int) -> list[list[Point]]:
    """Batches whose steps overlap: steps drawn from a range, repeats and NaNs among them."""
    sent = []
    for _ in range(batches):
        batch: list[Point] = []
        for _ in range(size):
            value = None if rng.random() < 0.05 else rng.uniform(-1, 1)
            batch.append((rng.randrange(-50, 400), value, rng.uniform(0, 9)))
        sent.append(batch)
    return sent


def in_step_order(batches: list[list[Point]]) -> list[Point]:
    """What a read must give: by step, a repeated step's points in the order they were sent."""
    return sorted((point for batch in batches for point in batch), key=lambda point: point[0])


def as_points(columns: dict) -> list[Point]:
    steps, values, times = (columns[name].tolist() for name in ("step", "value", "time"))
    return [
        (step, None if math.isnan(value) else value, time)
        for step, value, time in zip(steps, values, times, strict=True)
    ]


# A group of 2 chunks a query: every read goes on from where the group before it ended.
@pytest.mark.parametrize("group", [2, chunks._GROUP])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_overlapping_batches_read_back_whole_and_by_pages_as_logged(
    seed: int, group: int, monkeypatch
) -> None:
    monkeypatch.setattr(chunks, "_GROUP", group)
    rng = random.Random(seed)
    owner = Owner.of_run(RunFactory().pk)
    batches = logged(rng, 12, rng.randrange(20, 300))
    for batch in batches:
        insert_points(owner, {"loss": batch}, attempt=1)
    found = find(owner, "loss")
    expected = in_step_order(batches)

    assert as_points(whole(found).columns) == expected
    for limit in (1, 7, 100, len(expected)):
        paged: list[Point] = []
        after = None
        while True:
            page = whole(found, after, limit)
            got = as_points(page.columns)
            # A page is ``limit`` points and the rest of its last step's repeats.
            assert len({step for step, _, _ in got[limit - 1 :]}) <= 1
            paged += got
            if page.next_step is None:
                break
            after = page.next_step
        assert paged == expected


def test_a_batch_larger_than_a_chunk_is_several_and_the_extreme_steps_keep() -> None:
    owner = Owner.of_run(RunFactory().pk)
    points = [(step, float(step % 5), 1.0) for step in range(2 * MAX_POINTS + 3)]
    points += [(LOWEST_STEP, -1.0, 2.0), (LAST, 1.0, 3.0)]
    insert_points(owner, {"loss": points}, attempt=2)

    sizes = sorted(MetricChunk.objects.values_list("points", flat=True))
    assert sizes == [5, MAX_POINTS, MAX_POINTS]
    found = find(owner, "loss")
    assert (found.first_step, found.last_step, found.points) == (LOWEST_STEP, LAST, len(points))
    assert as_points(whole(found).columns) == sorted(points)
    assert as_points(whole(found, after_step=LAST - 1).columns) == [(LAST, 1.0, 3.0)]
    assert whole(found, after_step=LAST).columns["step"].tolist() == []
    # Each extreme step's blocks start where Python's integers put them, at every size.
    series = MetricSeries.objects.filter(pk=found.pk)
    assert stored_blocks(series) == expected_blocks(series)
    lowest = {start for (_, size, start) in stored_blocks(series) if size == SIZES[0]}
    assert LOWEST_STEP - LOWEST_STEP % SIZES[0] in lowest


def test_a_cut_back_keeps_the_points_up_to_its_step_in_every_chunk() -> None:
    rng = random.Random(9)
    owner = Owner.of_run(RunFactory().pk)
    batches = logged(rng, 6, 150)
    for batch in batches:
        insert_points(owner, {"loss": batch}, attempt=1)

    drop_points_after(owner, 120)

    found = find(owner, "loss")
    kept = [point for point in in_step_order(batches) if point[0] <= 120]
    assert as_points(whole(found).columns) == kept
    assert (found.points, found.last_step) == (len(kept), max(step for step, _, _ in kept))
    assert MetricChunk.objects.filter(last_step__gt=120).count() == 0


def test_the_recent_points_are_the_attempts_newest(monkeypatch) -> None:
    monkeypatch.setattr(chunks, "_GROUP", 1)  # a chunk a query
    run = RunFactory()
    owner = Owner.of_run(run.pk)
    for start in range(0, 100, 20):
        points = [(step, 1.0, step / 10) for step in range(start, start + 20)]
        insert_points(owner, {"loss": points}, attempt=1)
    insert_points(owner, {"loss": [(step, 1.0, step / 10) for step in range(50, 80)]}, attempt=2)
    series_id = find(owner, "loss").pk

    assert recent(series_id, 1, 10).steps.tolist() == list(range(90, 100))
    assert recent(series_id, 1, 55).steps.tolist() == list(range(45, 100))
    assert recent(series_id, 2, 100).steps.tolist() == list(range(50, 80))
    assert recent(series_id, 3, 10).steps.tolist() == []
