"""Every rollup level gives the buckets the raw points give, min and max exactly.

Random series (NaN, repeats, gaps, negative first steps, late points, a resume that cuts
them back) are downsampled at bucket counts that make the read use each level in turn and
the points themselves; each bucket is compared with one recomputed from the stored points.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict

import pytest

from npulab.hosts.models import Host
from npulab.series import rollups
from npulab.series.ingest import Point, drop_points_after, insert_points
from npulab.series.models import MetricSeries
from npulab.series.owners import Owner
from npulab.series.reads import find, plan, series
from tests.factories import HostFactory
from tests.series.blocks import expected_blocks, stored_blocks, stored_points

pytestmark = pytest.mark.django_db
KEY = "loss"


@pytest.fixture
def host() -> Host:
    return HostFactory(name="npu-01")


def random_points(rng: random.Random, first: int, span: int) -> list[Point]:
    """About two thirds of ``span`` steps from ``first``: gaps, repeats, NaN and infinities
    (stored as None), runs of missing values, and a spike."""
    points: list[Point] = []
    step = first
    while step < first + span:
        if rng.random() < 0.002:
            step += rng.randint(1, 700)  # a gap, sometimes wider than a block
            continue
        roll = rng.random()
        if roll < 0.03:
            value = None
        elif roll < 0.035:
            value = rng.uniform(-1e6, 1e6)
        else:
            value = rng.gauss(0, 1)
        points.append((step, value, 1.0))
        if rng.random() < 0.01:
            points.append((step, rng.gauss(0, 1), 1.0))  # logged twice
        step += 1 if rng.random() < 0.7 else 2
    rng.shuffle(points)
    return points


def written(owner: Owner, rng: random.Random, points: list[Point]) -> None:
    """``points`` in batches of random sizes, like a forwarder's."""
    while points:
        size = rng.randint(1, 4000)
        insert_points(owner, {KEY: points[:size]})
        points = points[size:]


def recomputed(series_id: int, base: int, width: int) -> list[list]:
    groups: dict[int, list[tuple[int, float | None]]] = defaultdict(list)
    for _, _, step, value, _, _ in stored_points(MetricSeries.objects.filter(pk=series_id)):
        groups[(step - base) // width].append((step, value))
    buckets = []
    for _, group in sorted(groups.items()):
        values = [value for _, value in group if value is not None]
        buckets.append(
            [
                min(step for step, _ in group),
                pytest.approx(math.fsum(values) / len(values), rel=1e-9, abs=1e-6)
                if values
                else None,
                min(values, default=None),
                max(values, default=None),
            ]
        )
    return buckets


def assert_every_level_matches_the_points(owner: Owner) -> None:
    found = find(owner, KEY)
    assert found is not None
    assert found.first_step is not None
    span = found.last_step - found.first_step + 1
    levels = set()
    # From one bucket of the coarsest blocks down to buckets of one or two points.
    for points in (1, 2, 3, 7, 30, 61, 250, 999, 2001, span // 3, span // 2):
        if not 1 <= points < found.points:
            continue
        size, base, width = plan(found.first_step, found.last_step, points)
        levels.add(size)
        body = series(owner, KEY, points)
        assert body["downsampled"] is True
        assert body["points"] == recomputed(found.pk, base, width), (points, size, width)
        assert len(body["points"]) <= points
    assert levels == {*rollups.SIZES, None}


@pytest.mark.parametrize("seed", [1, 2])
def test_every_level_gives_the_buckets_of_the_raw_points(host, seed) -> None:
    rng = random.Random(seed)
    owner = Owner.of_host(host.pk, 0)
    first = rng.choice([0, 7, -2345, 1_000_003])
    written(owner, rng, random_points(rng, first, 30_000))
    assert stored_blocks(MetricSeries.objects.all()) == expected_blocks(MetricSeries.objects.all())

    assert_every_level_matches_the_points(owner)


def test_a_resumed_series_gives_the_buckets_of_its_points_at_every_level(host) -> None:
    rng = random.Random(11)
    owner = Owner.of_host(host.pk, 1)
    written(owner, rng, random_points(rng, 15, 40_000))
    # Cut back mid-block, then logged again over the cut with other values.
    drop_points_after(owner, 21_337)
    written(owner, rng, random_points(rng, 21_338, 20_000))
    assert stored_blocks(MetricSeries.objects.all()) == expected_blocks(MetricSeries.objects.all())

    assert_every_level_matches_the_points(owner)


def test_a_series_of_only_missing_values_has_buckets_without_values(host) -> None:
    owner = Owner.of_host(host.pk, 0)
    insert_points(owner, {KEY: [(step, None, 1.0) for step in range(5000)]})

    body = series(owner, KEY, 10)

    assert [point[0] for point in body["points"]] == list(range(0, 5000, 1000))
    assert {tuple(point[1:]) for point in body["points"]} == {(None, None, None)}
    assert series(owner, KEY)["points"][:2] == [(0, None), (1, None)]


@pytest.mark.parametrize("steps", [10**4, 123_457, 4_990_000, 10**6, 10**7])
def test_a_bucket_reads_at_most_five_blocks_or_points_at_any_resolution(steps: int) -> None:
    for points in [*range(1, 60), *range(60, 5001, 97), 4999, 5000]:
        size, base, width = plan(0, steps - 1, points)
        # Five of its level at most; only the coarsest level may hold more.
        read = width // size if size else width
        assert read <= 5 or size == rollups.SIZES[0], (points, size, width)
        buckets = math.ceil((steps - base) / width)
        assert min(points, steps) / 2 <= buckets <= points, (points, size, width)
