"""A MindSpore run's graph IR dumps (``save_graphs``): bounded on disk, kept as one artifact.

Graph mode writes hundreds of ``*.ir`` files at level 1 (35 MB for a LeNet) and far
more at higher levels or for a large network. While the run trains, the runner keeps
the oldest files up to the spec's bound and deletes what comes beyond it, so a dump
never fills the host's disk; at the end the kept ones go into ``graphs.tar.gz``, and
the summary and the log say how many files were written and how many kept.
Standard library only, Python 3.8.
"""

from __future__ import annotations

import os
import tarfile
from typing import Any

ARCHIVE = "graphs.tar.gz"


class GraphDumps:
    """The dump directory of one run, and what was dropped from it to stay in bounds."""

    def __init__(self, directory: str, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.dropped_files = 0
        self.dropped_bytes = 0

    def _files(self) -> list[tuple[float, str, int]]:
        found = []
        for root, _dirs, names in os.walk(self.directory):
            for name in names:
                path = os.path.join(root, name)
                try:
                    status = os.lstat(path)
                except OSError:
                    continue
                found.append((status.st_mtime, path, status.st_size))
        return sorted(found)

    def trim(self) -> list[tuple[str, int]]:
        """Delete the files past the bound, newest first; returns the ones kept."""
        kept: list[tuple[str, int]] = []
        total = 0
        for _mtime, path, size in self._files():
            if total + size <= self.max_bytes:
                kept.append((path, size))
                total += size
                continue
            try:
                os.unlink(path)
            except OSError:
                continue
            self.dropped_files += 1
            self.dropped_bytes += size
        return kept

    def archive(self, target: str) -> dict[str, Any] | None:
        """Pack what is kept into ``target``; the summary's numbers, or None with no dumps."""
        kept = self.trim()
        if not kept and not self.dropped_files:
            return None
        with tarfile.open(target, "w:gz") as tar:
            for path, _size in kept:
                tar.add(path, arcname=os.path.relpath(path, self.directory))
        kept_bytes = sum(size for _path, size in kept)
        return {
            "graph_files": len(kept) + self.dropped_files,
            "graph_bytes": kept_bytes + self.dropped_bytes,
            "graph_files_kept": len(kept),
            "graph_bytes_kept": kept_bytes,
        }

    def notice(self, summary: dict[str, Any]) -> str:
        """One line for the run's log."""
        line = (
            f"save_graphs: {summary['graph_files']} IR files ({_mb(summary['graph_bytes'])})"
            f", {summary['graph_files_kept']} kept in {ARCHIVE}"
        )
        if self.dropped_files:
            line += (
                f"; {self.dropped_files} files ({_mb(self.dropped_bytes)}) dropped beyond the "
                f"bound of {_mb(self.max_bytes)} (save_graphs_max_mb)"
            )
        return line


def _mb(size: int) -> str:
    return f"{size / (1 << 20):.1f} MB"
