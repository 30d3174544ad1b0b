"""Series stored before the 100- and 10,000-step rollups get them from their stored blocks."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from npulab.series.models import MetricRollup
from tests.series.blocks import expected_blocks, stored_blocks
from tests.series.test_rollups import metric, noisy_batches, of_run, send, started

TWO_LEVELS = ("series", "0001_initial")


def migrate(target: tuple[str, str]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])


@pytest.fixture
def restored() -> Iterator[None]:
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_the_new_levels_are_built_from_the_stored_blocks(owner, cpu_host, restored) -> None:
    run = started(owner, cpu_host)
    for batch in noisy_batches(random.Random(15), range(-40, 23_456), 5000):
        send(cpu_host, run, batch)
    send(cpu_host, run, [metric("loss", 40_000, 7.0)])  # a lone block far off
    migrate(TWO_LEVELS)
    assert set(MetricRollup.objects.values_list("size", flat=True).distinct()) == {10, 1000}

    migrate(("series", "0002_rollup_levels"))

    assert stored_blocks(of_run(run)) == expected_blocks(of_run(run))
    sizes = set(MetricRollup.objects.values_list("size", flat=True).distinct())
    assert sizes == {10, 100, 1000, 10_000}
