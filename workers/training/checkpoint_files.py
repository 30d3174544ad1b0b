"""Checkpoint files a script writes itself: MindSpore ``.ckpt``, PyTorch ``.pt`` / ``.safetensors``.

A training spec may name a ``checkpoint_dir``; the script gets it as
``NPULAB_CHECKPOINT_FILES`` and needs no npulab import. While it trains, the runner
polls the directory: a file whose size has stopped changing is verified (its format's
structure read to the end, so a file cut short is caught), then adopted into the run's
checkpoint store (``workers.track.checkpoint``'s step directories, with a manifest) and
announced with a ``checkpoint`` event, after which the host worker uploads it and the
platform's retention keeps it like any other. Adopted checkpoints are numbered in the
order they were written: MindSpore's names (``net-2_8.ckpt``) count steps within an epoch.

On resume, the newest checkpoint of the store that verifies is copied back into the
directory under its own name and its path is given to the script as
``NPULAB_RESUME_CHECKPOINT``. A damaged one is skipped with a warning and the previous
one used. Standard library only, Python 3.8.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import time
import zipfile
from typing import Callable

from workers.track import checkpoint as store

SUFFIXES = (".ckpt", ".pt", ".pth", ".safetensors")
SOURCE_KEY = "source"
# A file is taken once its size and modification time held for this long.
SETTLE_S = 1.0
_CHUNK = 1 << 20


class Damaged(ValueError):
    """A checkpoint file that does not hold what its format says."""


def verify_file(path: str, name: str = "") -> None:
    """Raise ``Damaged`` saying why when the file at ``path`` is not a whole checkpoint.

    Its format is told by its name's suffix (``name``: the name it was written under).
    """
    name = name or path
    try:
        with open(path, "rb") as handle:
            data_size = os.fstat(handle.fileno()).st_size
            if data_size == 0:
                raise Damaged("the file is empty")
            if name.endswith(".ckpt"):
                _verify_protobuf(handle.read())
            elif name.endswith(".safetensors"):
                _verify_safetensors(handle, data_size)
            else:
                _verify_zip(path)
    except OSError as exc:
        raise Damaged(f"unreadable: {exc.strerror}") from None


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise Damaged("cut short inside a field header")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise Damaged("a malformed field header")


def _fields(data: bytes) -> list[tuple[int, int, bytes]]:
    """(field number, wire type, payload) of each field of one protobuf message."""
    fields = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, at = _varint(data, at)
            payload = b""
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if at + width > len(data):
                raise Damaged("cut short inside a number")
            payload, at = data[at : at + width], at + width
        elif wire == 2:
            length, at = _varint(data, at)
            if at + length > len(data):
                raise Damaged(
                    f"cut short: a field of {length} bytes at offset {at}, "
                    f"the file ends {len(data) - at} bytes later"
                )
            payload, at = data[at : at + length], at + length
        else:
            raise Damaged(f"not a MindSpore checkpoint (wire type {wire} at offset {at})")
        fields.append((number, wire, payload))
    return fields


def _verify_protobuf(data: bytes) -> None:
    """A MindSpore ``.ckpt``: a ``Checkpoint`` message of ``Value``s (a name and a tensor)."""
    values = _fields(data)
    if not values:
        raise Damaged("no parameters")
    for number, wire, payload in values:
        if wire == 2 and number == 1:
            _fields(payload)  # each Value: its name and its TensorProto, whole


def _verify_safetensors(handle: object, size: int) -> None:
    header = handle.read(8)  # type: ignore[attr-defined]
    if len(header) < 8:
        raise Damaged("cut short inside the header length")
    (length,) = struct.unpack("<Q", header)
    if 8 + length > size:
        raise Damaged("cut short inside the header")
    try:
        described = json.loads(handle.read(length))  # type: ignore[attr-defined]
    except ValueError:
        raise Damaged("the header is not JSON") from None
    ends = [
        entry["data_offsets"][1]
        for name, entry in described.items()
        if name != "__metadata__" and isinstance(entry, dict) and "data_offsets" in entry
    ]
    expected = 8 + length + max(ends, default=0)
    if size < expected:
        raise Damaged(f"cut short: the header describes {expected} bytes, the file has {size}")


def _verify_zip(path: str) -> None:
    """``torch.save``'s format: a zip archive, whose directory is at its very end."""
    try:
        with zipfile.ZipFile(path) as archive:
            if not archive.namelist():
                raise Damaged("an empty archive")
    except zipfile.BadZipFile as exc:
        raise Damaged(f"not a whole torch.save archive ({exc})") from None


def _sha256(path: str) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


class CheckpointFiles:
    """Adopts the checkpoint files of ``directory`` into the store at ``store_dir``.

    ``announce(info)`` is called for each adopted one (the runner writes its event);
    ``warn(line)`` once for each file refused.
    """

    def __init__(
        self,
        directory: str,
        store_dir: str,
        keep: int,
        announce: Callable[[store.CheckpointInfo], None],
        warn: Callable[[str], None],
        hold_unsettled: bool = False,
    ) -> None:
        self.directory = directory
        self.store_dir = store_dir
        self.keep = keep
        self.announce = announce
        self.warn = warn
        self.hold_unsettled = hold_unsettled
        self._seen: dict[str, tuple[int, float, float]] = {}
        self._done: set[tuple[str, int, float]] = set()

    def skip_existing(self, name: str) -> None:
        """Never adopt the file ``name`` as it is now (the one restored for the resume)."""
        key = self._key(name)
        if key is not None:
            self._done.add(key)

    def _key(self, name: str) -> tuple[str, int, float] | None:
        try:
            status = os.stat(os.path.join(self.directory, name))
        except OSError:
            return None
        return (name, status.st_size, status.st_mtime)

    def poll(self, final: bool = False) -> list[store.CheckpointInfo]:
        """Adopt the files that are done; ``final``: the writer has exited, take all."""
        try:
            names = sorted(
                (name for name in os.listdir(self.directory) if name.endswith(SUFFIXES)),
                key=lambda name: (self._key(name) or ("", 0, 0.0))[2],
            )
        except FileNotFoundError:
            return []
        adopted = []
        now = time.monotonic()
        for name in names:
            key = self._key(name)
            if key is None or key in self._done:
                continue
            seen = self._seen.get(name)
            if seen is None or seen[:2] != key[1:]:
                self._seen[name] = (key[1], key[2], now)
                if not final:
                    continue
            elif not final and now - seen[2] < SETTLE_S:
                continue
            self._done.add(key)
            info = self._adopt(name)
            if info is not None:
                adopted.append(info)
        return adopted

    def _adopt(self, name: str) -> store.CheckpointInfo | None:
        path = os.path.join(self.directory, name)
        try:
            verify_file(path)
        except Damaged as exc:
            self.warn(f"checkpoint file {name} is damaged, not kept: {exc}")
            return None
        steps = store.complete(self.store_dir)
        step = steps[-1] + 1 if steps else 1
        os.makedirs(self.store_dir, exist_ok=True)
        final = os.path.join(self.store_dir, store.step_dir_name(step))
        temporary = os.path.join(self.store_dir, f".{store.step_dir_name(step)}.tmp-{os.getpid()}")
        shutil.rmtree(temporary, ignore_errors=True)
        os.makedirs(temporary)
        state = os.path.join(temporary, store.STATE_FILE)
        shutil.copyfile(path, state)
        size, sha256 = _sha256(state)
        manifest = {
            "format": store.FORMAT,
            "step": step,
            "created": time.time(),
            SOURCE_KEY: name,
            "files": {store.STATE_FILE: {"bytes": size, "sha256": sha256}},
        }
        with open(os.path.join(temporary, store.MANIFEST_FILE), "w", encoding="utf-8") as handle:
            json.dump(manifest, handle)
        os.rename(temporary, final)
        store.prune(self.store_dir, self.keep, hold_unsettled=self.hold_unsettled)
        info = store.CheckpointInfo(step, final, size, sha256)
        self.announce(info)
        return info


def restore(store_dir: str, directory: str, suffix: str, warn: Callable[[str], None]) -> str:
    """Copy the newest checkpoint that verifies into ``directory``; its path, or "" for none.

    Each one skipped (its manifest or checksum fails, or its file is cut short) is named in
    ``warn``, and the one before it is tried.
    """
    for step in reversed(store.complete(store_dir)):
        try:
            info = store.verify(store_dir, step)
            verify_file(info.state_path, _source(info.path) or suffix)
        except ValueError as exc:
            warn(f"checkpoint {step} is damaged, the previous one is used: {exc}")
            continue
        name = _source(info.path) or f"npulab-resume-{step}{suffix}"
        os.makedirs(directory, exist_ok=True)
        target = os.path.join(directory, name)
        temporary = target + ".npulab-tmp"
        shutil.copyfile(info.state_path, temporary)
        os.replace(temporary, target)
        return target
    return ""


def _source(step_dir: str) -> str:
    try:
        with open(os.path.join(step_dir, store.MANIFEST_FILE), encoding="utf-8") as handle:
            name = json.load(handle).get(SOURCE_KEY, "")
    except (OSError, ValueError, AttributeError):
        return ""
    # A name from a manifest is written into the script's directory: a bare file name only.
    return name if isinstance(name, str) and name == os.path.basename(name) else ""
