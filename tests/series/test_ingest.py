"""Writing points: counts and blocks through every way a batch goes in."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from npulab.series.ingest import insert_points
from npulab.series.models import MetricSeries
from npulab.series.owners import Owner
from tests.factories import HostFactory, RunFactory
from tests.series.blocks import expected_blocks, stored_blocks

pytestmark = pytest.mark.django_db


# A batch goes in as chunks, a large one as several, and its blocks in one statement
# (series.rollups); Django's query-logging cursor (DEBUG) must take every one, and what goes
# past it on PostgreSQL must not break it.
@pytest.mark.parametrize("size", [10, 25_000])
def test_points_store_under_a_query_logging_cursor(size: int) -> None:
    owner = Owner.of_host(HostFactory(name="npu-01").pk, 0)
    first = [(step, float(step), 1.7e9 + step) for step in range(size)]
    second = [(step, None if step % 7 == 0 else 0.5, 1.7e9) for step in range(size, 2 * size)]
    with CaptureQueriesContext(connection):
        insert_points(owner, {"temperature_c": first})
        insert_points(owner, {"temperature_c": second})
    series = MetricSeries.objects.filter(host_id=owner.host_id)
    assert list(series.values_list("points", "last_step")) == [(2 * size, 2 * size - 1)]
    assert stored_blocks(series) == expected_blocks(series)


def test_a_batch_counts_its_owners_series_alone_and_creates_the_new_ones() -> None:
    host = HostFactory(name="npu-01")
    device, whole = Owner.of_host(host.pk, 0), Owner.of_host(host.pk)
    runs = [Owner.of_run(RunFactory().pk) for _ in range(2)]
    insert_points(device, {"power_w": [(0, 1.0, 1.0), (1, 2.0, 1.0)]})
    insert_points(whole, {"power_w": [(5, 1.0, 1.0)]})
    insert_points(runs[0], {"loss": [(0, 1.0, 1.0)]})
    # One stored series and one new; a step below the stored last one leaves it as it is.
    insert_points(whole, {"power_w": [(9, 1.0, 1.0), (3, None, 1.0)], "fan_rpm": [(2, 1.0, 1.0)]})
    insert_points(runs[1], {"loss": [(4, 1.0, 1.0)], "lr": []})
    insert_points(runs[0], {"loss": [(1, 1.0, 1.0), (2, 1.0, 1.0)]})
    counts = {
        (series.run_id, series.device_index, series.key): (series.points, series.last_step)
        for series in MetricSeries.objects.all()
    }
    assert counts == {
        (None, 0, "power_w"): (2, 1),
        (None, None, "power_w"): (3, 9),
        (None, None, "fan_rpm"): (1, 2),
        (runs[0].run_id, None, "loss"): (3, 2),
        (runs[1].run_id, None, "loss"): (1, 4),
    }
    for pk in MetricSeries.objects.values_list("pk", flat=True):
        one = MetricSeries.objects.filter(pk=pk)  # the helpers name series by key
        assert stored_blocks(one) == expected_blocks(one)
