"""Writing points: counts and blocks through every way a batch goes in."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from npulab.series.ingest import insert_points
from npulab.series.models import MetricSeries
from npulab.series.owners import Owner
from tests.factories import HostFactory
from tests.series.blocks import expected_blocks, stored_blocks

pytestmark = pytest.mark.django_db


# A batch goes in as chunks, a large one as several, and its blocks by COPY on PostgreSQL
# (series.ingest); Django's query-logging cursor (DEBUG) must take every one.
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
