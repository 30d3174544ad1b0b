"""Records sorted in bounded memory: the external sort the summary's passes share.

A trace holds its events in no order the summary can use (device intervals across
streams, a thread's ops and its launch calls thousands of events apart), so records
go through an external sort: runs of ``RUN_RECORDS`` sorted in memory, spilled to a
temporary file as doubles, merged when read. Memory is one run plus a read buffer per
run, whatever the number of records.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import tempfile
from array import array
from collections.abc import Iterator

RUN_RECORDS = 16_384
_READ_RECORDS = 2048


class ExternalSort:
    """Tuples of numbers, sorted; ``ints`` says which fields are read back as ints (a
    spilled run holds doubles, exact for ints below 2**53)."""

    def __init__(self, tmpdir: str | None, ints: tuple[bool, ...]) -> None:
        self.tmpdir = tmpdir
        self.fields = len(ints)
        self.int_fields = [i for i, is_int in enumerate(ints) if is_int]
        self.buffer: list[tuple] = []
        self.runs: list[str] = []

    def add(self, record: tuple) -> None:
        self.buffer.append(record)
        if len(self.buffer) >= RUN_RECORDS:
            self.spill()

    def spill(self) -> None:
        self.buffer.sort()
        flat = array("d")
        for record in self.buffer:
            flat.extend(record)
        fd, path = tempfile.mkstemp(dir=self.tmpdir, suffix=".run")
        with os.fdopen(fd, "wb") as out:
            flat.tofile(out)
        self.runs.append(path)
        self.buffer = []

    def _read_run(self, path: str) -> Iterator[tuple]:
        fields, int_fields = self.fields, self.int_fields
        with open(path, "rb") as stream:
            while True:
                block = array("d")
                with contextlib.suppress(EOFError):
                    block.fromfile(stream, _READ_RECORDS * fields)
                if not block:
                    return
                for i in range(0, len(block), fields):
                    record = block[i : i + fields].tolist()
                    for j in int_fields:
                        record[j] = int(record[j])
                    yield tuple(record)

    def sorted(self) -> Iterator[tuple]:
        """Every record so far, in order."""
        self.buffer.sort()
        if not self.runs:
            return iter(self.buffer)
        return heapq.merge(*(self._read_run(path) for path in self.runs), iter(self.buffer))

    def close(self) -> None:
        for path in self.runs:
            with contextlib.suppress(OSError):
                os.remove(path)
        self.runs = []
        self.buffer = []
