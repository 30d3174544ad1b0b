"""Buckets of a series stored at every block are combined a block at a time over all
buckets (``_every_block``): the same answer, bit for bit, as combining each bucket's blocks
(``_combine``), which every other read takes."""

from __future__ import annotations

import numpy as np
import pytest

from npulab.series.reads import _combine, _every_block


def blocks(rng: np.random.Generator, start: int, count: int, size: int) -> tuple[np.ndarray, ...]:
    """``count`` consecutive blocks of ``size`` from block ``start``, as ``rollups.read``
    gives them: some without a finite value, some whose sum is -0.0."""
    first = (start + np.arange(count)) * size + rng.integers(0, size, count)
    counted = rng.integers(0, 4, count)
    total = np.where(counted > 0, rng.normal(0, 1e3, count), 0.0)
    total[rng.random(count) < 0.1] = -0.0
    low = np.where(counted > 0, rng.normal(0, 1, count), np.nan)
    high = np.where(counted > 0, low + rng.random(count), np.nan)
    low[rng.random(count) < 0.05] = -0.0
    high[rng.random(count) < 0.05] = 0.0
    return first, counted, total, low, high


def same(got: list[np.ndarray], expected: list[np.ndarray]) -> bool:
    return all(
        one.dtype == other.dtype
        and np.array_equal(one, other, equal_nan=True)
        and np.array_equal(np.signbit(one), np.signbit(other))
        for one, other in zip(got, expected, strict=True)
    )


@pytest.mark.parametrize("seed", range(40))
def test_a_bucket_a_row_gives_what_reduceat_gives(seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = int(rng.choice([10, 100, 1000]))
    per = int(rng.integers(1, 9))
    base = int(rng.integers(-50, 50)) * size
    # The first stored block anywhere in its bucket, the last one too.
    start = base // size + int(rng.integers(0, 3 * per))
    columns = blocks(rng, start, int(rng.integers(1, 200)), size)

    got = _every_block(*columns, base, per * size, size)

    assert got is not None
    assert same(got, _combine(*columns, base, per * size))


def test_a_missing_block_or_a_wide_bucket_is_left_to_reduceat() -> None:
    rng = np.random.default_rng(1)
    first, counted, total, low, high = blocks(rng, 0, 50, 10)
    gap = np.arange(50) != 20
    missing = [column[gap] for column in (first, counted, total, low, high)]

    assert _every_block(*missing, 0, 40, 10) is None
    assert _every_block(first, counted, total, low, high, 0, 9 * 10, 10) is None
    assert _every_block(*(column[:0] for column in missing), 0, 40, 10) is None
