"""numpy columns as PostgreSQL arrays in binary, for statements that take rows as columns.

A batch's rollup blocks reach the database as one statement that ``unnest``s a column an
array. psycopg adapts a list element by element in Python; these columns are numpy
arrays already, and an array's binary form is a short header then each element as its
length and its big-endian bytes, which numpy writes in one go. No element is NULL: a
float column sends NaN, which the statement turns into NULL (``NULLIF(x, 'NaN')``).
"""

from __future__ import annotations

import struct

import numpy as np
import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

# dtype -> (element type oid, array type oid, big-endian element)
_TYPES = {
    np.dtype(np.int64): (20, 1016, ">i8"),
    np.dtype(np.int32): (23, 1007, ">i4"),
    np.dtype(np.float64): (701, 1022, ">f8"),
    np.dtype(np.bool_): (16, 1000, "?"),
}


class _Array(bytes):
    """An array's binary form; ``oid`` says its type to the dumper."""

    oid: int


def _dumper(array_oid: int) -> type[Dumper]:
    class ArrayDumper(Dumper):
        format = Format.BINARY
        oid = array_oid

        def dump(self, obj: bytes) -> bytes:
            return obj

    return ArrayDumper


_CLASSES: dict[np.dtype, type[_Array]] = {
    dtype: type(f"Array{oid}", (_Array,), {"oid": oid}) for dtype, (_, oid, _) in _TYPES.items()
}
_DUMPERS = {cls: _dumper(cls.oid) for cls in _CLASSES.values()}


def array(column: np.ndarray) -> _Array:
    """``column`` (int64, int32, float64 or bool) as a one-dimensional array parameter."""
    element_oid, _, big_endian = _TYPES[column.dtype]
    if not len(column):
        return _CLASSES[column.dtype](struct.pack(">iiI", 0, 0, element_oid))
    size = np.dtype(big_endian).itemsize
    elements = np.empty(len(column), [("length", ">i4"), ("value", big_endian)])
    elements["length"] = size
    elements["value"] = column
    header = struct.pack(">iiIii", 1, 0, element_oid, len(column), 1)
    return _CLASSES[column.dtype](header + elements.tobytes())


def register(cursor: psycopg.Cursor) -> None:
    """Let ``cursor`` send what ``array`` makes."""
    for cls, dumper in _DUMPERS.items():
        cursor.adapters.register_dumper(cls, dumper)
