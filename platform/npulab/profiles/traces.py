"""Trace files on the platform: what an import may be, how it is stored, how it is unpacked.

A trace is stored compressed, in one of two forms (``workers.contract.events``): a
Kineto/Chrome trace as ``*.json.gz``, a torch_npu ``*_ascend_pt`` folder as ``*.tar.gz``.
An import may also come as plain ``.json`` or ``.tar`` (gzipped here) or ``.tgz``.

Everything here reads streams in blocks, with a limit on the bytes a trace unpacks to
(NPULAB_PROFILE_MAX_UNPACKED_BYTES) checked while reading, so neither a large trace nor a
gzip bomb fills memory or disk. An archive is the user's: no absolute name, no ``..``, no
link out of it, nothing but files, folders and links inside it.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import posixpath
import shutil
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from django.conf import settings
from django.core.files.uploadhandler import StopUpload, TemporaryFileUploadHandler

from npulab.core.text import error_text
from workers.contract.events import ASCEND, KINETO, TRACE_SUFFIXES

BLOCK = 1 << 20
ASCEND_FOLDER_SUFFIX = "_ascend_pt"
ASCEND_OUTPUT = "ASCEND_PROFILER_OUTPUT"
# An ascend_pt folder holds tens to a few thousand files; far more is no profile.
MAX_MEMBERS = 200_000
# Suffixes of an upload -> (format, the suffix it is stored under, is it compressed).
IMPORT_SUFFIXES = (
    (".json.gz", KINETO, True),
    (".json", KINETO, False),
    (".tar.gz", ASCEND, True),
    (".tgz", ASCEND, True),
    (".tar", ASCEND, False),
)
ACCEPTED = ", ".join(suffix for suffix, _, _ in IMPORT_SUFFIXES)


class TraceRefused(ValueError):
    """The file is no trace npulab takes, or too big; ``status`` is the HTTP answer."""

    def __init__(self, message: str, status: int = 400, **fields: Any) -> None:
        super().__init__(message)
        self.status = status
        self.fields = fields


def max_bytes() -> int:
    return int(settings.NPULAB["PROFILE_MAX_BYTES"])


def max_unpacked_bytes() -> int:
    return int(settings.NPULAB["PROFILE_MAX_UNPACKED_BYTES"])


def too_large(size: int, limit: int) -> TraceRefused:
    return TraceRefused(
        f"the trace's {size} bytes exceed the limit of {limit} bytes (NPULAB_PROFILE_MAX_BYTES)",
        status=413,
        max_bytes=limit,
    )


def unpacks_too_large(limit: int) -> TraceRefused:
    return TraceRefused(
        f"the trace unpacks to more than {limit} bytes (NPULAB_PROFILE_MAX_UNPACKED_BYTES)",
        status=413,
        max_unpacked_bytes=limit,
    )


@dataclass
class PreparedTrace:
    """An upload made ready for the artifact store: compressed, checked, digested."""

    path: str
    name: str
    format: str
    bytes: int
    sha256: str
    raw_bytes: int


def import_form(name: str) -> tuple[str, str, bool]:
    """(format, stored name, compressed?) of an upload named ``name``, or TraceRefused."""
    base = posixpath.basename(name.replace("\\", "/")).strip()
    lowered = base.lower()
    for suffix, fmt, compressed in IMPORT_SUFFIXES:
        if lowered.endswith(suffix) and len(base) > len(suffix):
            stem = base[: -len(suffix)]
            return fmt, stem + TRACE_SUFFIXES[fmt], compressed
    names = ", ".join("*" + suffix for suffix, _, _ in IMPORT_SUFFIXES)
    raise TraceRefused(f"{base or 'the file'!r} is not a trace npulab reads: name it {names}")


def prepare_import(source: IO[bytes], name: str, size: int, work_dir: str) -> PreparedTrace:
    """Check an uploaded trace and write it, compressed, into ``work_dir``.

    TraceRefused (413) past NPULAB_PROFILE_MAX_BYTES before a byte is read, or past the
    unpacked limit while reading; (400) when it is not what its name says. The caller
    removes ``work_dir``.
    """
    fmt, stored_name, compressed = import_form(name)
    limit = max_bytes()
    if size > limit:
        raise too_large(size, limit)
    target = os.path.join(work_dir, "upload" + TRACE_SUFFIXES[fmt])
    with open(target, "wb") as out:
        if compressed:
            shutil.copyfileobj(source, out, BLOCK)
        else:
            with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as packed:
                shutil.copyfileobj(source, packed, BLOCK)
    raw_bytes = check_json_gz(target) if fmt == KINETO else check_tar(target)
    stored = os.path.getsize(target)
    if stored > limit:  # a plain .json that does not compress below the limit
        raise too_large(stored, limit)
    return PreparedTrace(target, stored_name, fmt, stored, file_sha256(target), raw_bytes)


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def _gunzipped(handle: IO[bytes], limit: int) -> Iterator[bytes]:
    """The blocks of a gzip stream, refusing more than ``limit`` bytes and a broken stream."""
    total = 0
    try:
        with gzip.GzipFile(fileobj=handle, mode="rb") as unpacked:
            for block in iter(lambda: unpacked.read(BLOCK), b""):
                total += len(block)
                if total > limit:
                    raise unpacks_too_large(limit)
                yield block
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceRefused(f"not a complete gzip file: {error_text(exc)}") from exc


def check_json_gz(path: str) -> int:
    """The unpacked size of a gzipped Chrome trace; TraceRefused if it is none."""
    first = b""
    total = 0
    with open(path, "rb") as handle:
        for block in _gunzipped(handle, max_unpacked_bytes()):
            if not first:
                first = block.lstrip()[:1]
            total += len(block)
    if first not in (b"{", b"["):
        raise TraceRefused("not a Kineto/Chrome trace: the JSON must be an object or an array")
    return total


def gunzip_to(source: IO[bytes], target: str) -> int:
    """A stored ``*.json.gz`` unpacked into ``target``; its size. The unpacked limit holds."""
    total = 0
    with open(target, "wb") as out:
        for block in _gunzipped(source, max_unpacked_bytes()):
            out.write(block)
            total += len(block)
    return total


def copy_to(source: IO[bytes], target: str) -> int:
    """A stored plain ``*.json`` copied into ``target``; its size. The unpacked limit holds."""
    limit = max_unpacked_bytes()
    total = 0
    with open(target, "wb") as out:
        for block in iter(lambda: source.read(BLOCK), b""):
            total += len(block)
            if total > limit:
                raise unpacks_too_large(limit)
            out.write(block)
    return total


def member_problem(member: tarfile.TarInfo) -> str | None:
    """Why an archive member may not be unpacked, or None."""
    name = member.name
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return f"{name!r} is an absolute path"
    if ".." in parts:
        return f"{name!r} climbs out with '..'"
    if member.issym() or member.islnk():
        target = member.linkname.replace("\\", "/")
        if member.issym():
            joined = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
        else:
            joined = posixpath.normpath(target)
        if target.startswith("/") or joined == ".." or joined.startswith("../"):
            return f"{name!r} links outside the archive ({member.linkname!r})"
        return None
    if not (member.isfile() or member.isdir()):
        return f"{name!r} is neither a file nor a folder"
    return None


def _members(archive: tarfile.TarFile, limit: int) -> Iterator[tarfile.TarInfo]:
    """The archive's members, each checked, with the unpacked total kept under ``limit``."""
    total = count = 0
    try:
        for member in archive:
            count += 1
            if count > MAX_MEMBERS:
                raise TraceRefused(f"the archive holds more than {MAX_MEMBERS} entries")
            problem = member_problem(member)
            if problem:
                raise TraceRefused(f"unsafe archive: {problem}")
            total += max(member.size, 0)
            if total > limit:
                raise unpacks_too_large(limit)
            yield member
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise TraceRefused(f"not a readable tar archive: {exc}") from exc


@contextlib.contextmanager
def _open_tar(**where: Any) -> Iterator[tarfile.TarFile]:
    """A gzipped tar read as a stream (one pass); what is not one is TraceRefused."""
    try:
        archive = tarfile.open(mode="r|gz", **where)  # noqa: SIM115 - closed below
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise TraceRefused(f"not a readable tar.gz archive: {exc}") from exc
    with archive:
        yield archive


def check_tar(path: str) -> int:
    """The unpacked size of a ``*.tar.gz`` holding an ascend_pt folder; TraceRefused if not."""
    found = False
    total = 0
    with _open_tar(name=path) as archive:
        for member in _members(archive, max_unpacked_bytes()):
            total += max(member.size, 0)
            parts = member.name.replace("\\", "/").strip("/").split("/")
            if any(p.endswith(ASCEND_FOLDER_SUFFIX) or p == ASCEND_OUTPUT for p in parts):
                found = True
    if not found:
        raise TraceRefused(
            f"the archive holds no *{ASCEND_FOLDER_SUFFIX} folder (nor {ASCEND_OUTPUT}/): "
            "tar the folder torch_npu's profiler wrote"
        )
    return total


def extract_tar(source: IO[bytes], dest: str) -> int:
    """A stored ``*.tar.gz`` unpacked into ``dest``, member by checked member; its size."""
    total = 0
    with _open_tar(fileobj=source) as archive:
        for member in _members(archive, max_unpacked_bytes()):
            total += max(member.size, 0)
            # The "data" filter checks again (and drops modes, owners, devices).
            archive.extract(member, dest, filter="data")
    return total


def ascend_folder(root: str) -> str:
    """Where the unpacked profile starts: ``root``, or down a chain of lone folders to the
    first that holds the output (one ascend_pt folder, or several: one per rank)."""
    folder = root
    while True:
        entries = os.listdir(folder)
        if ASCEND_OUTPUT in entries or len(entries) != 1:
            return folder
        only = os.path.join(folder, entries[0])
        if not os.path.isdir(only) or os.path.islink(only):
            return folder
        folder = only


# A multipart body holds more than its file: the boundaries and the other fields.
MULTIPART_SLACK = 64 * 1024


class LimitedUpload(TemporaryFileUploadHandler):
    """Django's upload to a temporary file, given up once past NPULAB_PROFILE_MAX_BYTES.

    What was received goes with the temporary file; the rest of the body is read and
    dropped, so a client that sends too much never fills the disk.
    """

    def __init__(self, request: Any, limit: int) -> None:
        super().__init__(request)
        self.limit = limit
        self.received = 0
        self.exceeded = False

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self.received += len(raw_data)
        if self.received > self.limit:
            self.exceeded = True
            raise StopUpload(connection_reset=False)
        return super().receive_data_chunk(raw_data, start)


def limit_upload(request: Any) -> LimitedUpload | None:
    """Hold the request's upload to the limit while it is read; 413 at once if it says it
    is larger. None when the body was read already (the size is checked afterwards)."""
    limit = max_bytes()
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit + MULTIPART_SLACK:
        raise too_large(declared, limit)
    handler = LimitedUpload(request, limit)
    try:
        request.upload_handlers = [handler]
    except AttributeError:  # "cannot set the upload handlers after the upload was processed"
        return None
    return handler


def check_upload(handler: LimitedUpload | None) -> None:
    """413 when the upload went past the limit while it was read."""
    if handler is not None and handler.exceeded:
        raise TraceRefused(
            f"the trace is larger than the limit of {handler.limit} bytes "
            "(NPULAB_PROFILE_MAX_BYTES)",
            status=413,
            max_bytes=handler.limit,
        )
