"""Columns of the store read straight into numpy arrays, without a Python object per value.

A read of a hundred thousand points spent most of its time making two hundred thousand
Python numbers and JSON of them. On PostgreSQL each column comes back as one ``array_agg``
in the binary protocol and is viewed in place with numpy; other databases hand rows, which
are transposed once. NULL reads as NaN in a float column: the store keeps no NaN of its own
(a NaN or infinite value is stored NULL), so NaN always means "no value", and orjson writes
it as ``null``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from django.db import connection
from psycopg.adapt import Loader
from psycopg.pq import Format

# numpy's type of each SQL column type a read asks for.
INT8, INT4, FLOAT8 = "int8", "int4", "float8"
_DTYPES = {INT8: np.int64, INT4: np.int32, FLOAT8: np.float64}
# The binary array format: ndim, has-nulls flag, element type, then (length, lower bound)
# per dimension; each element is its byte length then its big-endian value.
_HEADER_1D = 20
_WIRE = {INT8: ">i8", INT4: ">i4", FLOAT8: ">f8"}


class _RawArray(Loader):
    """The array as its bytes, for numpy to view: psycopg's own loader makes a list."""

    format = Format.BINARY

    def load(self, data: Any) -> Any:
        return data


def read(
    sql: str, params: Sequence[Any], types: Sequence[str], order: str, **names: str
) -> list[np.ndarray]:
    """The columns of ``sql``'s rows, as arrays of ``types``, in ``order``.

    ``sql`` selects from an ordered subquery, with ``{agg}`` around each column
    (``{agg}(step)``) and ``{order}`` after the FROM: on PostgreSQL ``{agg}`` becomes
    ``array_agg`` and the query one row of arrays, which keep the subquery's order (an
    ORDER BY in the aggregate would sort again, and shuffle a step's repeats); elsewhere
    the rows come back as they are, ordered by ``{order}``. A float column must not hold
    NULL on PostgreSQL (a NULL element breaks the fixed stride): ``COALESCE(value, {nan})``.
    ``names`` fill the rest of the template (table names).
    """
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            sql = sql.format(agg="", nan="NULL", order=f"ORDER BY {order}", **names)
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        if not rows:
            return [np.empty(0, _DTYPES[kind]) for kind in types]
        # None becomes NaN in a float array.
        return [
            np.array(column, _DTYPES[kind])
            for column, kind in zip(zip(*rows, strict=True), types, strict=True)
        ]
    connection.ensure_connection()
    # A binary result needs psycopg's own cursor (Django's is a client-side one): the
    # same connection, so the same transaction.
    with psycopg.Cursor(connection.connection) as cursor:
        for kind in set(types):
            cursor.adapters.register_loader(psycopg.adapters.types[kind].array_oid, _RawArray)
        sql = sql.format(agg="array_agg", nan="'NaN'", order="", **names)
        cursor.execute(sql, params, binary=True)
        row = cursor.fetchone()
    return [
        _array(data, kind) for data, kind in zip(row or [None] * len(types), types, strict=True)
    ]


def _array(data: Any, kind: str) -> np.ndarray:
    if data is None:  # array_agg of no rows
        return np.empty(0, _DTYPES[kind])
    wire = np.dtype([("length", ">i4"), ("value", _WIRE[kind])])
    return np.frombuffer(data, wire, offset=_HEADER_1D)["value"].astype(_DTYPES[kind])


def as_python(values: np.ndarray) -> list[Any]:
    """``values`` as a list of Python numbers, NaN as None (for callers in Python)."""
    listed = values.tolist()
    if values.dtype.kind == "f":
        for index in np.flatnonzero(np.isnan(values)).tolist():
            listed[index] = None
    return listed
