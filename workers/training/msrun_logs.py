"""msrun's per-worker logs, relayed into the run's log as they grow.

msrun writes each worker's output to ``worker_<rank>.log`` in its ``--log_dir`` (the
scheduler's to ``scheduler.log``, which msrun itself greps for errors when the job fails).
The training runner relays the workers' logs: each whole line, prefixed with its rank
(``[rank1]: epoch: 1 step: 4, loss is 0.21``, ``workers.contract.events.rank_prefix``), to
its own stdout, which is the run's log. The stdout recogniser takes metrics from rank 0's
lines only; the diagnosis reads every rank's. Each rank's last lines are kept, to say which
rank failed and of what. Standard library only, Python 3.8.
"""

from __future__ import annotations

import collections
import os
import re
import threading
from typing import IO, Callable, Iterable, NamedTuple

from workers.contract.events import rank_prefix
from workers.tracebacks import TRACEBACK_HEADER

WORKER_LOG = re.compile(r"^worker_(\d+)\.log$")
POLL_S = 0.2
TAIL_LINES = 400
READ_BYTES = 1 << 20
# A "line" this long without a newline is relayed as it is: memory stays bounded.
MAX_PARTIAL_BYTES = 64 * 1024
# msrun's report of the first worker it saw fail (it then kills the others).
_WORKER_FAILED = re.compile(r"Worker process (\d+) exit with exception\. Error code: (-?\d+)")
# workers.training.launch's first line in each worker: its rank and pid.
_ANNOUNCED = re.compile(r"^npulab: rank (\d+) of \d+, .*, pid (\d+)$")


class FailedRank(NamedTuple):
    """The rank that failed the job: its last lines, and its exit code where msrun said."""

    rank: int
    lines: list[str]
    exit_code: int | None


class WorkerLogs:
    """Follows ``worker_*.log`` in ``log_dir``, writing each line through ``write`` (whole
    lines, one call a line) from a thread of its own until ``stop``."""

    def __init__(self, log_dir: str, write: Callable[[bytes], None]) -> None:
        self.log_dir = log_dir
        self._write = write
        self._files: dict[int, IO[bytes]] = {}
        self._partial: dict[int, bytes] = {}
        self._tails: dict[int, collections.deque[str]] = {}
        self._pids: dict[int, int] = {}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="msrun-logs", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Relay the rest (the workers have ended: a last line without its newline too)."""
        self._stopping.set()
        self._thread.join()
        self.poll(final=True)
        for handle in self._files.values():
            handle.close()

    def _follow(self) -> None:
        while not self._stopping.wait(POLL_S):
            self.poll()

    def poll(self, final: bool = False) -> None:
        try:
            names = sorted(os.listdir(self.log_dir))
        except OSError:
            return  # msrun has not made it yet
        for name in names:
            match = WORKER_LOG.match(name)
            if match is None:
                continue
            rank = int(match.group(1))
            handle = self._files.get(rank)
            if handle is None:
                try:
                    # Kept open while it grows; closed by stop.
                    handle = open(os.path.join(self.log_dir, name), "rb")  # noqa: SIM115
                except OSError:
                    continue
                self._files[rank] = handle
            while True:
                chunk = handle.read(READ_BYTES)
                self._relay(rank, chunk, final and not chunk)
                if not chunk:
                    break

    def _relay(self, rank: int, data: bytes, final: bool) -> None:
        data = self._partial.pop(rank, b"") + data
        cut = data.rfind(b"\n") + 1
        lines = data[:cut].split(b"\n")[:-1]
        rest = data[cut:]
        if rest and (final or len(rest) >= MAX_PARTIAL_BYTES):
            lines.append(rest)
        elif rest:
            self._partial[rank] = rest
        prefix = rank_prefix(rank).encode("utf-8")
        tail = self._tails.setdefault(rank, collections.deque(maxlen=TAIL_LINES))
        for line in lines:
            self._write(prefix + line + b"\n")
            text = line.decode("utf-8", errors="replace").rstrip("\r")
            tail.append(text)
            if rank not in self._pids:
                announced = _ANNOUNCED.match(text)
                if announced is not None and int(announced.group(1)) == rank:
                    self._pids[rank] = int(announced.group(2))

    def failed(self, launcher_lines: Iterable[str]) -> FailedRank | None:
        """The rank that failed: the one msrun saw fail first (``launcher_lines``: msrun's
        stderr), else the first whose log ends in a traceback; None when neither says."""
        by_pid = {pid: rank for rank, pid in self._pids.items()}
        for line in launcher_lines:
            reported = _WORKER_FAILED.search(line)
            if reported is not None and int(reported.group(1)) in by_pid:
                rank = by_pid[int(reported.group(1))]
                return FailedRank(rank, list(self._tails[rank]), int(reported.group(2)))
        for rank in sorted(self._tails):
            if any(line.startswith(TRACEBACK_HEADER) for line in self._tails[rank]):
                return FailedRank(rank, list(self._tails[rank]), None)
        return None
