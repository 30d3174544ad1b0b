"""numpy columns reach PostgreSQL as the arrays they hold."""

from __future__ import annotations

import math

import numpy as np
import pytest
from django.db import connection

from npulab.core.sql import server_cursor
from npulab.series import arrays

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's arrays"),
]

COLUMNS = [
    np.array([0, -1, 2**63 - 1, -(2**63)], np.int64),
    np.array([7, -(2**31), 2**31 - 1], np.int32),
    np.array([0.5, -0.0, 1e308, math.nan, math.inf], np.float64),
    np.array([True, False, True], np.bool_),
    np.empty(0, np.int64),
    np.empty(0, np.float64),
]


@pytest.mark.parametrize("column", COLUMNS, ids=lambda column: f"{column.dtype}-{len(column)}")
def test_a_column_arrives_as_its_array_element_for_element(column: np.ndarray) -> None:
    with server_cursor() as cursor:
        arrays.register(cursor)
        cursor.execute("SELECT %s, array_length(%s, 1)", [arrays.array(column)] * 2)
        found, length = cursor.fetchone()
    assert length == (len(column) or None)
    np.testing.assert_array_equal(np.array(found, column.dtype), column)
