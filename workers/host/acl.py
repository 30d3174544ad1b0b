"""POSIX access ACLs on a folder, read and written as the kernel stores them.

The run user must pass through folders that are root's alone (a checkout or an
interpreter under /root, pytest's temporary folders). A named-user ACL entry grants
that without opening the folder to every user. The entries are written through the
``system.posix_acl_access`` extended attribute, so a host needs no ``acl`` package
(``setfacl``) for it: Debian's minimal images have none.

The attribute's format (linux/posix_acl_xattr.h): a little-endian u32 version (2), then
8-byte entries ``(u16 tag, u16 permissions, u32 id)``, sorted by tag, then id.
"""

from __future__ import annotations

import errno
import os
import struct
from typing import Dict, Tuple

XATTR = "system.posix_acl_access"
_VERSION = 2
_HEADER = struct.Struct("<I")
_ENTRY = struct.Struct("<HHI")
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_NO_ID = 0xFFFFFFFF
SEARCH, READ = 0o1, 0o4

Entries = Dict[Tuple[int, int], int]


class AclUnsupported(OSError):
    """The folder's filesystem keeps no ACLs."""


def read(path: str) -> Entries:
    """The folder's access ACL as {(tag, id): permissions}; its mode bits when it has none."""
    try:
        raw = os.getxattr(path, XATTR)
    except OSError as exc:
        if exc.errno in (errno.ENODATA, getattr(errno, "ENOATTR", errno.ENODATA)):
            mode = os.stat(path).st_mode
            return {
                (USER_OBJ, _NO_ID): (mode >> 6) & 0o7,
                (GROUP_OBJ, _NO_ID): (mode >> 3) & 0o7,
                (OTHER, _NO_ID): mode & 0o7,
            }
        if exc.errno == errno.EOPNOTSUPP:
            raise AclUnsupported(exc.errno, f"no ACLs on the filesystem of {path}") from None
        raise
    (version,) = _HEADER.unpack_from(raw)
    if version != _VERSION or (len(raw) - _HEADER.size) % _ENTRY.size:
        raise ValueError(f"{path}: an ACL of an unknown format (version {version})")
    entries = {}
    for offset in range(_HEADER.size, len(raw), _ENTRY.size):
        tag, permissions, ident = _ENTRY.unpack_from(raw, offset)
        entries[(tag, ident)] = permissions
    return entries


def write(path: str, entries: Entries) -> None:
    """Store ``entries`` as the folder's access ACL, with the mask recomputed (as setfacl
    does): the union of the named entries' and the owning group's permissions."""
    entries = {key: value for key, value in entries.items() if key[0] != MASK}
    if any(tag in (USER, GROUP) for tag, _ in entries):
        mask = 0
        for (tag, _), permissions in entries.items():
            if tag in (USER, GROUP, GROUP_OBJ):
                mask |= permissions
        entries[(MASK, _NO_ID)] = mask
    raw = _HEADER.pack(_VERSION) + b"".join(
        _ENTRY.pack(tag, permissions, ident)
        for (tag, ident), permissions in sorted(entries.items())
    )
    try:
        os.setxattr(path, XATTR, raw)
    except OSError as exc:
        if exc.errno == errno.EOPNOTSUPP:
            raise AclUnsupported(exc.errno, f"no ACLs on the filesystem of {path}") from None
        raise


def allow(path: str, uid: int, permissions: int) -> None:
    """Add ``permissions`` (SEARCH, READ or both) to user ``uid``'s entry on the folder,
    keeping every other entry."""
    entries = read(path)
    key = (USER, uid)
    entries[key] = entries.get(key, 0) | permissions
    write(path, entries)


def remove_user(path: str, uid: int) -> None:
    """Take user ``uid``'s named entry off the folder, if it has one."""
    entries = read(path)
    if entries.pop((USER, uid), None) is not None:
        write(path, entries)


def user_permissions(path: str, uid: int) -> int:
    """What ``uid``'s named entry on the folder grants (0 without one): its permissions
    within the mask, which a later chmod of the folder narrows (``chmod 700`` leaves the
    entry but masks it to nothing, as pytest does to its temporary root)."""
    entries = read(path)
    return entries.get((USER, uid), 0) & entries.get((MASK, _NO_ID), 0o7)
