"""The bytes of a read's rows: what a client has always been sent for the same stored data.

The rows form (JSON ``[[step, value], ...]``, ``[[step, mean, min, max], ...]`` downsampled)
and CSV are written from the read's numpy columns. However that is done, the body stays the
one the first encoder wrote, a Python tuple a row handed to orjson: these tests pin it on
the values where two ways of writing a number part (NaN and infinities as null, -0.0,
shortest float forms at the ends of the range, int64 steps past 2**53).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest

from npulab.series import encode
from npulab.series.reads import BUCKETS, WHOLE, Page

STEPS = np.array([-(2**63) + 10_000, -1, 0, 2**53 - 1, 2**53 + 1, 2**63 - 1], np.int64)
MEAN = np.array([np.nan, -0.0, 0.1, 1e16, 2.5e-5, 1 / 3])
LOW = np.array([np.nan, -0.0, 5e-324, -1.7976931348623157e308, 1e-7, -np.inf])
HIGH = np.array([np.nan, 0.0, 1e22, 1.7976931348623157e308, 123456789012345.0, np.inf])
AWKWARD = Page(dict(zip(BUCKETS, (STEPS, MEAN, LOW, HIGH), strict=True)))

ROWS = (
    b'{"key":"loss","downsampled":true,"points":['
    b"[-9223372036854765808,null,null,null],"
    b"[-1,-0.0,-0.0,0.0],"
    b"[0,0.1,5e-324,1e+22],"
    b"[9007199254740991,1e+16,-1.7976931348623157e+308,1.7976931348623157e+308],"
    b"[9007199254740993,0.000025,1e-7,123456789012345.0],"
    b"[9223372036854775807,0.3333333333333333,null,null]]}"
)
CSV = (
    b"step,mean,min,max\n"
    b"-9223372036854765808,,,\n"
    b"-1,-0.0,-0.0,0.0\n"
    b"0,0.1,5e-324,1e+22\n"
    b"9007199254740991,1e+16,-1.7976931348623157e+308,1.7976931348623157e+308\n"
    b"9007199254740993,0.000025,1e-7,123456789012345.0\n"
    b"9223372036854775807,0.3333333333333333,,\n"
)


def first_rows(head: dict[str, Any], page: Page) -> bytes:
    """The rows as the first encoder wrote them: a tuple of Python numbers a row."""
    rows = list(zip(*(column.tolist() for column in page.columns.values()), strict=True))
    return orjson.dumps({**head, "points": rows})


def test_awkward_values_are_written_as_they_always_were() -> None:
    head = {"key": "loss", "downsampled": True}

    assert encode.rows(head, AWKWARD) == ROWS == first_rows(head, AWKWARD)
    assert encode.csv(AWKWARD) == CSV
    assert encode.csv(AWKWARD, header=False) == CSV.split(b"\n", 1)[1]


@pytest.mark.parametrize("names", [WHOLE[:2], WHOLE, BUCKETS])
@pytest.mark.parametrize("count", [0, 1, 2, 2_500])
def test_rows_of_any_page_are_the_first_encoders(names: tuple[str, ...], count: int) -> None:
    rng = np.random.default_rng(count)
    # Steps of every magnitude, sorted (as a read gives them) with repeats; values of every
    # magnitude and sign, NaN, infinities and zeros of both signs among them.
    steps = np.sort(rng.integers(-(2**63), 2**63 - 1, count, dtype=np.int64, endpoint=True))
    steps[1::7] = steps[:-1:7]
    columns = [steps]
    for _ in names[1:]:
        values = rng.standard_normal(count) * 10.0 ** rng.integers(-320, 308, count)
        values[rng.random(count) < 0.1] = np.nan
        specials = np.array([np.inf, -np.inf, 0.0, -0.0])
        values[rng.random(count) < 0.05] = rng.choice(specials)
        columns.append(values)
    page = Page(dict(zip(names, columns, strict=True)))
    head = {"key": "loss", "total": count, "downsampled": names == BUCKETS}

    assert encode.rows(head, page) == first_rows(head, page)
    # A CSV line is a row's JSON without its brackets, a missing value empty.
    rows = zip(*(column.tolist() for column in columns), strict=True)
    lines = [orjson.dumps(row)[1:-1].replace(b"null", b"") + b"\n" for row in rows]
    assert encode.csv(page) == ",".join(names).encode() + b"\n" + b"".join(lines)
