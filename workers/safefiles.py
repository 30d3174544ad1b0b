"""Files in a folder a run can write to, opened without following a link the run put there.

A root host worker reads and writes files in each run's folders (the spool, its offset,
pid files, upload states, checkpoint marks) that the run's user owns while it runs. A link
the run leaves at one of those names (``forwarded.offset.tmp`` to ``/etc/shadow``) would
have the worker read or overwrite whatever it points to, as root. So the worker opens such
names with ``O_NOFOLLOW``, creates new files with ``O_EXCL`` under names no one can guess,
and, where a file is used for as long as a run lives, holds it open, so what later becomes
of the name no longer matters. Standard library only, Python 3.8.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from typing import Iterable, Iterator

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def open_dir(path: str, dir_fd: int | None = None) -> int:
    """A descriptor of the folder ``path`` (OSError if it is a link or no folder)."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)


def open_beneath(root: str, names: Iterable[str]) -> int:
    """A descriptor of the folder ``root``/``names``…, where neither ``root``'s last part nor
    any of ``names`` is followed if it is a link (OSError: ELOOP, ENOTDIR or ENOENT; EINVAL
    for a name that is no folder's own, such as ``..``).

    Each folder is opened inside the one before it, so a rename or a link the run makes
    meanwhile cannot lead the walk elsewhere; the folders above ``root`` are trusted.
    """
    names = list(names)
    for name in names:
        if name in ("", ".", "..") or os.sep in name:
            raise OSError(errno.EINVAL, "not a folder's own name", name)
    descriptor = _folder(root)
    for name in names:
        try:
            inner = _folder(name, descriptor)
        finally:
            os.close(descriptor)
        descriptor = inner
    return descriptor


def _folder(path: str, dir_fd: int | None = None) -> int:
    try:
        return open_dir(path, dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            name = os.path.basename(path)
            raise OSError(exc.errno, f"{name} is a link or no folder", path) from None
        raise


@contextlib.contextmanager
def held(root: str, *names: str) -> Iterator[str]:
    """``root``/``names``… held open (``open_beneath``) for the block, as a path (Linux's
    ``/proc/self/fd``) that leads to that folder whatever becomes of its names meanwhile."""
    descriptor = open_beneath(root, names)
    try:
        yield fd_path(descriptor)
    finally:
        os.close(descriptor)


def fd_path(descriptor: int) -> str:
    """A path to the folder open as ``descriptor``: the same folder whatever becomes of its
    names (Linux's ``/proc/self/fd``)."""
    return f"/proc/self/fd/{descriptor}"


def open_file(path: str, flags: int, mode: int = 0o644, dir_fd: int | None = None) -> int:
    """``os.open`` of a regular file: it fails (ELOOP) where ``path`` names a link, and
    (EINVAL) where it names no regular file. A fifo the run left there would block the
    open for good, and a device (``/dev/zero``) never end a read; ``O_NONBLOCK`` changes
    nothing for a regular file."""
    descriptor = os.open(path, flags | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, mode, dir_fd=dir_fd)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return descriptor


def read_text(path: str, dir_fd: int | None = None, limit: int = 1 << 20) -> str:
    """The start of a small file, decoded; OSError if it is missing, a link, or no regular
    file (``open_file``)."""
    descriptor = open_file(path, os.O_RDONLY, dir_fd=dir_fd)
    with os.fdopen(descriptor, "rb") as handle:
        return handle.read(limit).decode("utf-8", "replace")


def write_whole(
    path: str,
    data: bytes,
    mode: int = 0o644,
    dir_fd: int | None = None,
    durable: bool = False,
) -> None:
    """``data`` into ``path`` whole or not at all (a reader never sees it half written);
    ``durable``: on the disk before it takes the name.

    Written to a new file under a name no one could have put a link at, then renamed over
    ``path``: a rename replaces a link there, it never writes through it.
    """
    folder, name = os.path.split(path)
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    descriptor = open_file(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode, dir_fd)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temporary, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=dir_fd)
        raise


def touch(path: str, mode: int = 0o644) -> None:
    """An empty file at ``path`` (a mark); a link there is replaced, never written through."""
    write_whole(path, b"", mode)


def real_dir(path: str) -> str:
    """``path`` as a folder of its own: a link there (a run's leftover) is removed first."""
    if os.path.islink(path):
        os.unlink(path)
    os.makedirs(path, exist_ok=True)
    return path


def drop_links(folder: str, names: Iterable[str]) -> list[str]:
    """Remove the links among ``folder``'s ``names``; returns the names removed."""
    dropped = []
    for name in names:
        path = os.path.join(folder, name)
        if os.path.islink(path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            dropped.append(name)
    return dropped
