"""Each rank's output prefixed with its rank, so the run's log knows which rank printed a line.

The ranks of a multi-process run share the supervisor's stdout and stderr pipes, so their
lines arrive mixed and anonymous. ``mark_output`` sends this process's descriptors 1 and
2 (what Python, C and C++ code and the process's own children write) through pipes to a
helper process forked from it, which writes each whole line on with the rank's prefix
(``[rank3]: …``, workers.contract.events.rank_prefix, as msrun's workers' lines get)
before it, one ``write(2)`` a line. The helper ignores the signals that stop a run, so it
writes the last lines of a rank that is stopping (its traceback) before it sees the end of
its pipes and exits; SIGKILL of the run's process groups takes it too. Standard library
only, Python 3.8.
"""

from __future__ import annotations

import os
import select
import signal

from workers.contract.events import rank_prefix

# A line longer than this is passed on in pieces, each prefixed: memory stays bounded.
MAX_LINE_BYTES = 64 * 1024
_READ_BYTES = 65536


def mark_output(rank: int) -> int:
    """Prefix every line this process prints from now on with ``rank``'s; returns the
    helper's pid."""
    pipes = {fd: os.pipe() for fd in (1, 2)}
    originals = {fd: os.dup(fd) for fd in (1, 2)}
    pid = os.fork()
    if pid == 0:
        try:
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(signum, signal.SIG_IGN)
            for _, write_end in pipes.values():
                os.close(write_end)
            relay({pipes[fd][0]: originals[fd] for fd in (1, 2)}, rank_prefix(rank).encode())
        finally:
            os._exit(0)
    for fd, (read_end, write_end) in pipes.items():
        os.close(read_end)
        os.dup2(write_end, fd)
        os.close(write_end)
    for original in originals.values():
        os.close(original)
    return pid


def relay(sources: dict[int, int], prefix: bytes) -> None:
    """Copy each source descriptor to its target, ``prefix`` before every line, until every
    source has ended; a last line without its newline gets one."""
    pending = dict.fromkeys(sources, b"")
    while pending:
        ready, _, _ = select.select(list(pending), [], [])
        for source in ready:
            chunk = os.read(source, _READ_BYTES)
            target = sources[source]
            if not chunk:
                if pending[source]:
                    _write_all(target, prefix + pending[source] + b"\n")
                del pending[source]
                os.close(source)
                continue
            lines = (pending[source] + chunk).split(b"\n")
            rest = lines.pop()
            while len(rest) > MAX_LINE_BYTES:
                lines.append(rest[:MAX_LINE_BYTES])
                rest = rest[MAX_LINE_BYTES:]
            pending[source] = rest
            for line in lines:
                # One write a line: whole beside the other ranks' lines in the shared pipe.
                _write_all(target, prefix + line + b"\n")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BrokenPipeError:
            return  # nobody reads any more: the run is gone
