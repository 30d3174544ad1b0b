"""A read's columns as bytes: JSON rows, JSON columns or CSV, whole or streamed page by page.

orjson writes numpy arrays itself, NaN as ``null``, so a column never becomes a list of
Python numbers; rows are zipped from the columns' lists (orjson writes tuples as arrays).
A streamed read is written a page at a time (``STREAM_PAGE`` points), so memory stays flat
however long the series: JSON rows and CSV in one pass, JSON columns by spooling every
column after the first to a temporary file (in memory while small) until the first ends.
"""

from __future__ import annotations

import contextlib
import gc
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from npulab.series.reads import WHOLE, Found, Page, whole

# Points per page of a streamed read: about 3 MB of JSON.
STREAM_PAGE = 100_000
_SPOOL_BYTES = 16 * 1024 * 1024
_CHUNK = 1024 * 1024
_NUMPY = orjson.OPT_SERIALIZE_NUMPY


def rows(head: dict[str, Any], page: Page) -> bytes:
    """``head`` with the page's points as ``"points": [[step, value], ...]``."""
    with _uncollected():
        return orjson.dumps({**head, "points": _rows(page)})


def columns(head: dict[str, Any], page: Page) -> bytes:
    """``head`` with one array per column: ``"step": [...], "value": [...]`` ..."""
    return orjson.dumps({**head, **page.columns}, option=_NUMPY)


def csv(page: Page, header: bool = True) -> bytes:
    """The page as CSV lines, a header line of the column names first; no value is empty."""
    body = _csv_lines(page)
    return (",".join(page.columns).encode() + b"\n" if header else b"") + body


def pages(found: Found, with_time: bool) -> Iterator[Page]:
    """The whole series, ``STREAM_PAGE`` points (or a few more) at a time."""
    after = None
    while True:
        page = whole(found, after, STREAM_PAGE, with_time=with_time)
        yield page
        if page.next_step is None:
            return
        after = page.next_step


def streamed_rows(head: dict[str, Any], found: Found) -> Iterator[bytes]:
    """``rows`` of the whole series, written as it is read."""
    # The head with an empty list, cut before the list's closing bracket.
    yield orjson.dumps({**head, "points": []})[:-2]
    yield from _joined(_dumped_rows(page)[1:-1] for page in pages(found, False))
    yield b"]}"


def streamed_columns(head: dict[str, Any], found: Found) -> Iterator[bytes]:
    """``columns`` of the whole series, written as it is read."""
    with contextlib.ExitStack() as files:
        later = {
            name: files.enter_context(tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES))
            for name in WHOLE[1:]
        }
        yield orjson.dumps(head)[:-1] + b',"step":['
        wrote = False
        for page in pages(found, True):
            if len(page.columns["step"]) == 0:
                continue
            comma = b"," if wrote else b""
            yield comma + orjson.dumps(page.columns["step"], option=_NUMPY)[1:-1]
            for name, spool in later.items():
                spool.write(comma + orjson.dumps(page.columns[name], option=_NUMPY)[1:-1])
            wrote = True
        yield b"]"
        for name, spool in later.items():
            yield b',"' + name.encode() + b'":['
            spool.seek(0)
            yield from iter(lambda spool=spool: spool.read(_CHUNK), b"")
            yield b"]"
        yield b"}"


def streamed_csv(found: Found) -> Iterator[bytes]:
    """``csv`` of the whole series (step, value, time), written as it is read."""
    yield ",".join(WHOLE).encode() + b"\n"
    for page in pages(found, True):
        yield _csv_lines(page)


def _rows(page: Page) -> list[tuple[Any, ...]]:
    return list(zip(*(column.tolist() for column in page.columns.values()), strict=True))


def _dumped_rows(page: Page) -> bytes:
    with _uncollected():
        return orjson.dumps(_rows(page))


@contextlib.contextmanager
def _uncollected() -> Iterator[None]:
    """No garbage collection while rows are made and written. A row is a tuple of numbers,
    freed by its count of references once written; the collections that making a page of
    them sets off only walk them (a sixth of the CPU of a whole read as JSON rows or CSV)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _csv_lines(page: Page) -> bytes:
    if len(next(iter(page.columns.values()), ())) == 0:
        return b""
    # orjson's rows are the CSV lines between brackets: numbers only, so "],[" occurs only
    # between rows and "null" (a missing value) only as a whole field.
    text = _dumped_rows(page)[2:-2]
    return text.replace(b"],[", b"\n").replace(b"null", b"") + b"\n"


def _joined(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The non-empty chunks of a JSON list's items, commas between them."""
    wrote = False
    for chunk in chunks:
        if chunk:
            yield b"," + chunk if wrote else chunk
            wrote = True
