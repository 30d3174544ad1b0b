"""Checkpoints that survive a crash mid-write and say when they are damaged.

One directory per step (``step-000000000123``) holding ``state.pt`` and a
``manifest.json`` with its size and SHA-256. A checkpoint sharded across the ranks of a
run (each rank saving its own state) is one such directory per rank: rank 0's in the
checkpoint directory itself, rank N's in its ``rank-N/`` folder, each manifest saying how
many shards the checkpoint has. A checkpoint is written under a
temporary name, fsynced and renamed into place, so a directory with the final
name is always complete; a damaged one (a disk error, a copy cut short) fails
its checksum and the previous one is used. Standard library here; torch is
passed in by the caller.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from typing import Any, Callable, Iterator

from workers.contract import script_env
from workers.safefiles import open_dir, open_file, read_text, touch, write_whole

FORMAT = 1
STATE_FILE = "state.pt"
MANIFEST_FILE = "manifest.json"
PINS_FILE = "pinned.json"
# Beside a step directory once the host worker is done with it (uploaded, or refused for
# good): until then retention keeps it, so nothing is pruned before its upload.
SETTLED_MARK = ".settled-{name}"
_STEP_DIR = re.compile(r"^step-(\d{12})$")
# Where rank N > 0 keeps its shards of sharded checkpoints, inside the checkpoint directory.
SHARD_DIR = "rank-{rank}"
_SHARD_DIR = re.compile(r"^rank-([1-9][0-9]{0,5})$")
_TEMPORARY = re.compile(r"^\.step-\d{12}\.tmp-(\d+)$")
_CHUNK = 1 << 20
# Buffers at least this large are written on the I/O thread while they are hashed.
_OVERLAP_BYTES = 1 << 20
# fdatasync is missing on macOS, where fsync does the same job.
_fdatasync = getattr(os, "fdatasync", os.fsync)
# torch's CRC32 option is process-wide: two saves must not restore it out of order.
_CRC32_LOCK = threading.Lock()


class CheckpointInfo:
    """Where a complete checkpoint is and what its manifest says."""

    def __init__(self, step: int, path: str, size: int, sha256: str) -> None:
        self.step = step
        self.path = path
        self.bytes = size
        self.sha256 = sha256

    @property
    def state_path(self) -> str:
        return os.path.join(self.path, STATE_FILE)

    def as_event(self) -> dict[str, Any]:
        return {"step": self.step, "path": self.path, "bytes": self.bytes, "sha256": self.sha256}


class _HashingWriter:
    """What torch.save writes to: hashes each buffer while another thread writes it.

    For a large checkpoint SHA-256 takes about as long as the disk, so a large
    buffer is written, flushed and synced on the I/O thread while this thread
    hashes it: the checksum costs almost nothing beyond the write itself.
    torch hands over views of its own memory that are valid only during the
    call, so ``write`` returns only once the buffer is on its way to disk.
    """

    def __init__(self, handle: Any, io: Executor) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()
        self.size = 0
        self._io = io

    def write(self, data: Any) -> int:
        size = memoryview(data).nbytes
        if size < _OVERLAP_BYTES:
            # The pickle and the zip headers: not worth a thread hop.
            self.digest.update(data)
            self.handle.write(data)
        else:
            written = self._io.submit(self._write_through, data)
            self.digest.update(data)
            written.result()
        self.size += size
        return size

    def flush(self) -> None:
        self.handle.flush()

    def _write_through(self, data: Any) -> None:
        self.handle.write(data)
        self.handle.flush()
        # Syncing each buffer while it is hashed keeps the disk busy beside the
        # hash; one fsync at the end would leave all the disk's work until last.
        _fdatasync(self.handle.fileno())


def step_dir_name(step: int) -> str:
    return f"step-{step:012d}"


def shard_dir(directory: str, rank: int) -> str:
    """Where ``rank`` keeps its shards of sharded checkpoints (rank 0: the directory)."""
    return directory if rank == 0 else os.path.join(directory, SHARD_DIR.format(rank=rank))


def shard_ranks(directory: str) -> list[int]:
    """The ranks other than 0 with a shard folder here, in order."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(_SHARD_DIR.match, names) if m)


def shard_count(info: CheckpointInfo) -> int:
    """How many shards the checkpoint has (1: a whole one), as its manifest says."""
    try:
        with open(os.path.join(info.path, MANIFEST_FILE), encoding="utf-8") as handle:
            count = json.load(handle).get("shards", 1)
    except (OSError, ValueError, AttributeError):
        return 1
    return count if isinstance(count, int) and count > 0 else 1


def save(
    directory: str,
    step: int,
    state: dict[str, Any],
    torch: Any,
    keep: int,
    shards: int = 1,
) -> CheckpointInfo:
    """Write ``state`` as the checkpoint of ``step`` atomically, then prune to ``keep``.

    ``shards``: the checkpoint's shards, when this is one rank's (its ``shard_dir``).
    """
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, step_dir_name(step))
    temporary = os.path.join(directory, f".{step_dir_name(step)}.tmp-{os.getpid()}")
    if os.path.exists(temporary):
        shutil.rmtree(temporary)
    os.makedirs(temporary)
    with open(os.path.join(temporary, STATE_FILE), "wb") as handle, ThreadPoolExecutor(
        max_workers=1, thread_name_prefix="checkpoint-write"
    ) as io:
        writer = _HashingWriter(handle, io)
        with _without_crc32(torch):
            torch.save(state, writer)
        handle.flush()
        os.fsync(handle.fileno())
    manifest = {
        "format": FORMAT,
        "step": step,
        "created": time.time(),
        "files": {STATE_FILE: {"bytes": writer.size, "sha256": writer.digest.hexdigest()}},
    }
    if shards > 1:
        manifest["shards"] = shards
    _write_json(os.path.join(temporary, MANIFEST_FILE), manifest)
    _fsync_dir(temporary)
    if os.path.exists(final):
        # The same step again (a resumed attempt reached it anew): replace it, and upload
        # the new one too.
        shutil.rmtree(final)
        _unsettle(directory, step)
    os.rename(temporary, final)
    _fsync_dir(directory)
    prune(directory, keep, hold_unsettled=bool(os.environ.get(script_env.RUN_ID)))
    return CheckpointInfo(step, final, writer.size, writer.digest.hexdigest())


@contextmanager
def _without_crc32(torch: Any) -> Iterator[None]:
    """torch.save without its CRC32 of every record, which the SHA-256 makes redundant.

    The CRC32 costs about a quarter of a bare save. torch.load ignores it (zip
    tools will report bad CRCs in state.pt). A torch without the option saves
    as it always did.
    """
    serialization = getattr(torch, "serialization", None)
    get = getattr(serialization, "get_crc32_options", None)
    set_ = getattr(serialization, "set_crc32_options", None)
    if get is None or set_ is None:
        yield
        return
    with _CRC32_LOCK:
        previous = get()
        set_(False)
        try:
            yield
        finally:
            set_(previous)


def complete(directory: str) -> list[int]:
    """Steps of the checkpoint directories with their final name, oldest first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(_STEP_DIR.match, names) if m)


def verify(directory: str, step: int) -> CheckpointInfo:
    """The checkpoint of ``step`` if its manifest and checksum hold; ValueError says why not."""
    path = os.path.join(directory, step_dir_name(step))
    # Neither the step's folder nor its files through a link: the host worker verifies a
    # run's checkpoints too, and a link could lead it to another run's.
    try:
        folder = open_dir(path)
    except OSError as exc:
        raise ValueError(f"no checkpoint folder ({exc.strerror})") from None
    try:
        return _verified(step, path, folder)
    finally:
        os.close(folder)


def _verified(step: int, path: str, folder: int) -> CheckpointInfo:
    try:
        manifest = json.loads(read_text(MANIFEST_FILE, dir_fd=folder))
        expected = manifest["files"][STATE_FILE]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"no readable manifest ({type(exc).__name__})") from None
    digest = hashlib.sha256()
    size = 0
    try:
        descriptor = open_file(STATE_FILE, os.O_RDONLY, dir_fd=folder)
        with os.fdopen(descriptor, "rb") as handle:
            for chunk in iter(lambda: handle.read(_CHUNK), b""):
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise ValueError(f"{STATE_FILE} unreadable: {exc.strerror}") from None
    if size != expected.get("bytes"):
        raise ValueError(
            f"{STATE_FILE} has {size} bytes, the manifest says {expected.get('bytes')}"
        )
    if digest.hexdigest() != expected.get("sha256"):
        raise ValueError(f"{STATE_FILE} fails its SHA-256 check")
    return CheckpointInfo(step, path, size, digest.hexdigest())


def latest_valid(directory: str, warn: Callable[[int, str], None]) -> CheckpointInfo | None:
    """The newest checkpoint that verifies; ``warn(step, why)`` for each one skipped."""
    for step in reversed(complete(directory)):
        try:
            return verify(directory, step)
        except ValueError as exc:
            warn(step, str(exc))
    return None


def load(info: CheckpointInfo, torch: Any) -> dict[str, Any]:
    """The saved state, on the CPU: the caller moves what it needs to its device.

    The file holds RNG states and other Python objects, so it is loaded with
    ``weights_only=False``: load only checkpoints this library wrote.
    """
    return torch.load(info.state_path, map_location="cpu", weights_only=False)


def pinned(directory: str) -> set[int]:
    try:
        return {int(step) for step in json.loads(read_text(os.path.join(directory, PINS_FILE)))}
    except (OSError, ValueError, TypeError):
        return set()


def set_pinned(directory: str, steps: set[int]) -> None:
    os.makedirs(directory, exist_ok=True)
    _write_json(os.path.join(directory, PINS_FILE), sorted(steps))


def _settled_path(directory: str, step: int) -> str:
    return os.path.join(directory, SETTLED_MARK.format(name=step_dir_name(step)))


def settle(directory: str, step: int) -> None:
    """The host worker is done with this checkpoint: retention may prune it now."""
    touch(_settled_path(directory, step))


def settled(directory: str, step: int) -> bool:
    return os.path.exists(_settled_path(directory, step))


def _unsettle(directory: str, step: int) -> None:
    with suppress(FileNotFoundError):
        os.unlink(_settled_path(directory, step))


def prune(directory: str, keep: int, hold_unsettled: bool = False) -> list[int]:
    """Delete all but the newest ``keep`` checkpoints and the pinned ones; returns the deleted.

    ``hold_unsettled``: a host worker uploads this run's checkpoints, so none goes before
    it is done with it. While the platform is out of reach the directory grows by one
    checkpoint per save instead; what is uploaded is pruned at the next save after.
    """
    steps = complete(directory)
    protected = set(steps[-keep:]) | pinned(directory)
    if hold_unsettled:
        protected |= {step for step in steps if not settled(directory, step)}
    deleted = [step for step in steps if step not in protected]
    for step in deleted:
        shutil.rmtree(os.path.join(directory, step_dir_name(step)), ignore_errors=True)
        _unsettle(directory, step)
    for name in os.listdir(directory):
        match = _TEMPORARY.match(name)
        # A temporary directory whose writer is gone is a write cut short.
        if match and not _alive(int(match.group(1))):
            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
    return deleted


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_json(path: str, data: Any) -> None:
    # The host worker writes the pins (as root, in a folder the run's user writes too).
    write_whole(path, json.dumps(data).encode("utf-8"), durable=True)


def _fsync_dir(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
