"""Scalars of TensorBoard event files, read while the run runs (``tensorboard_dirs``).

Files are read with TensorBoard's own loader (``RawEventFileLoader``, the ``tensorboard``
package: an optional extra of the worker); each file's loader is kept, so a file that
grows is read on from where it was, and one that appears late or rotates (a new
``events.out.tfevents.*`` beside the old) is picked up at the next scan. A truncated or
corrupt record is said once on the run's log; the rest of the file and of the run go on.
Histograms, images and other non-scalars are counted and listed at the end, with their tags,
not stored.

A scalar's key is its tag, as long as one directory writes that tag. TensorBoard tells the
same tag of two directories apart by the directory (its "run"), so here too: ``add_scalars
("acc", {"train": ..., "val": ...})`` writes tag ``acc`` into ``acc_train/`` and ``acc_val/``
beside the writer's own, which become ``acc/train`` and ``acc/val``; writers of their own in
``train/`` and ``val/`` that both log ``loss`` give ``loss`` (the first directory that
wrote it, in path order) and ``loss/val``. A key, once given, never changes.

Without TensorFlow, TensorBoard's reader is pure Python; with ``google-crc32c`` (in the same
extra) its CRC check runs in C (workers.capture.record_crc), and a record costs about 9 µs
read, checked, parsed and written as an event, against 18-20 µs: the reader keeps up with
a SummaryWriter logging as fast as it can, so little is left to read when the run ends.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from workers.capture import record_crc
from workers.capture.sink import Point, Sink

EVENT_FILE_MARK = "events.out.tfevents."
SCAN_S = 1.0
# A working directory may be a large checkout: a scan looks at no more than this many entries.
MAX_SCANNED = 20000
# Points read are written in batches of this many (one write(2) each).
WRITE_POINTS = 10000
_SCALAR_PLUGIN = "scalars"
# What a legacy summary's kind is called, as TensorBoard's plugins name them.
_KINDS = {"histo": "histograms", "image": "images", "audio": "audio", "tensor": "tensors"}
# Tags named in the notice of what was not stored, per kind.
_TAGS_SHOWN = 5


class TensorBoardReader:
    """Reads the event files under ``directories`` into ``sink`` until ``stop``."""

    def __init__(self, directories: list[str], sink: Sink, scan_s: float = SCAN_S) -> None:
        self.directories = directories
        self.sink = sink
        self.scan_s = scan_s
        self.loaders: dict[str, Any] = {}
        # Bytes of each file read as whole records: what is left at the end is damaged.
        self.consumed: dict[str, int] = {}
        self.others: dict[str, int] = {}
        self.other_tags: dict[str, list[str]] = {}
        self.scalars = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loader_class: Any = None
        self._parse: Any = None
        # (directory, tag) -> key, and the directory each bare tag is the key of.
        self._keys: dict[tuple[str, str], str] = {}
        self._owners: dict[str, str] = {}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="tensorboard", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Read what the files hold now, then stop (called once the script has ended)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for path, consumed in sorted(self.consumed.items()):
            try:
                left = os.path.getsize(path) - consumed
            except OSError:
                continue
            if left > 0:
                self.sink.notice(
                    "left:" + path,
                    f"{path}: the last {left} bytes are a cut or damaged record, not read",
                )
        if self.others:
            listed = ", ".join(
                f"{kind} x{count} ({', '.join(self.other_tags[kind])})"
                for kind, count in sorted(self.others.items())
            )
            self.sink.notice("others", f"not stored as metrics: {listed}")

    def _loop(self) -> None:
        while True:
            self.read_once()
            if self._stop.wait(self.scan_s):
                self.read_once()  # the last records, written as the script ended
                return

    def read_once(self) -> None:
        for path in self._files():
            loader = self.loaders.get(path)
            if loader is None:
                loader = self._loader(path)
                if loader is None:
                    return
                self.loaders[path] = loader
            self._read(path, loader)

    def _files(self) -> list[str]:
        found = []
        seen = 0
        for top in self.directories:
            for root, dirs, files in os.walk(top):
                dirs[:] = [name for name in dirs if not name.startswith(".")]
                seen += len(files) + len(dirs)
                found += [os.path.join(root, n) for n in files if EVENT_FILE_MARK in n]
                if seen > MAX_SCANNED:
                    self.sink.notice(
                        "scan", f"more than {MAX_SCANNED} files under {top}: not all scanned"
                    )
                    break
        return sorted(found)

    def _loader(self, path: str) -> Any:
        if self._loader_class is None:
            try:
                from tensorboard.backend.event_processing.event_file_loader import (
                    RawEventFileLoader,
                )
                from tensorboard.compat.proto.event_pb2 import Event
            except ImportError:
                self.sink.notice(
                    "missing",
                    f"{path} found, but the run's Python has no tensorboard package "
                    "(pip install tensorboard) to read it",
                )
                return None
            if record_crc.install() == record_crc.PYTHON:
                self.sink.notice(
                    "crc",
                    "the run's Python has no google-crc32c (pip install google-crc32c): "
                    "TensorBoard's reader checks each record in Python, about 1.6x slower",
                )
            self._loader_class = RawEventFileLoader
            self._parse = Event.FromString
        self.consumed[path] = 0
        return self._loader_class(path)

    def _read(self, path: str, loader: Any) -> None:
        points: list[Point] = []
        parse, found = self._parse, self._points
        consumed = self.consumed[path]
        directory = os.path.dirname(path)
        try:
            for record in loader.Load():
                # A record is its length (8 bytes), two CRCs (4 each) and its data.
                consumed += len(record) + 16
                found(parse(record), points, directory)
                if len(points) >= WRITE_POINTS:
                    self.scalars += self.sink.write(points)
                    points = []
        except Exception as exc:  # a truncated or corrupt record: TensorBoard's own errors
            self.sink.notice(
                "corrupt:" + path, f"{path}: {type(exc).__name__}: {exc}; read on later"
            )
        self.consumed[path] = consumed
        self.scalars += self.sink.write(points)

    def _key(self, directory: str, tag: str) -> str:
        key = self._keys.get((directory, tag))
        if key is None:
            folder = os.path.basename(directory)
            # add_scalars' folder: the main tag, "/" made "_", then "_" and the series' name.
            stem = tag.replace("/", "_") + "_"
            if folder.startswith(stem) and len(folder) > len(stem):
                key = f"{tag}/{folder[len(stem) :]}"
            elif self._owners.setdefault(tag, directory) == directory:
                key = tag
            else:
                key = f"{tag}/{folder}"
            self._keys[(directory, tag)] = key
        return key

    def _points(self, event: Any, points: list[Point], directory: str) -> None:
        """Append the scalars of ``event`` to ``points``; count what is not one."""
        if not event.HasField("summary"):
            return
        for value in event.summary.value:
            kind = value.WhichOneof("value")
            if kind == "simple_value":
                key = self._key(directory, value.tag)
                points.append((key, event.step, value.simple_value, event.wall_time))
            elif kind == "tensor" and _is_scalar(value):
                number = _tensor_number(value.tensor)
                if number is not None:
                    key = self._key(directory, value.tag)
                    points.append((key, event.step, number, event.wall_time))
            else:
                plugin = value.metadata.plugin_data.plugin_name if value.metadata else ""
                label = plugin or _KINDS.get(kind or "", kind or "unknown")
                self.others[label] = self.others.get(label, 0) + 1
                tags = self.other_tags.setdefault(label, [])
                if len(tags) < _TAGS_SHOWN and value.tag not in tags:
                    tags.append(value.tag)


def _is_scalar(value: Any) -> bool:
    plugin = value.metadata.plugin_data.plugin_name
    return plugin == _SCALAR_PLUGIN or (not plugin and not value.tensor.tensor_shape.dim)


def _tensor_number(tensor: Any) -> float | None:
    try:
        from tensorboard.util import tensor_util

        array = tensor_util.make_ndarray(tensor)
        if array.size != 1:
            return None
        return float(array.reshape(-1)[0])
    except Exception:  # not a number (a string tensor)
        return None
