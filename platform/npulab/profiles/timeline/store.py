"""Where a profile's timeline index is read from: a local copy of the stored file.

The index is kept in the artifacts storage (a directory or S3) under the profile's
``index_key`` prefix, as ``<index_key>/timeline.sqlite``. SQLite needs a local file,
so the first view copies it into NPULAB["PROFILE_CACHE_DIR"]; later views read the
copy. The copy's name holds the key's digest, so a rebuilt index (a new key) is
fetched anew and the old copy removed; the cache may be deleted at any time.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import shutil
import tempfile
from typing import TYPE_CHECKING

from django.conf import settings

from npulab.artifacts.storage import artifact_storage
from npulab.profiles.timeline.build import INDEX_NAME

if TYPE_CHECKING:
    from npulab.profiles.models import Profile


class IndexMissing(LookupError):
    """The profile has no timeline index (not built yet, or it failed)."""


def stored_name(index_key: str) -> str:
    """The index file's name in the artifacts storage under the profile's prefix."""
    return f"{index_key.rstrip('/')}/{INDEX_NAME}"


def local_index(profile: Profile) -> str:
    """The path of the profile's index on this machine, copied from storage if need be."""
    if not profile.index_key:
        raise IndexMissing(f"profile {profile.pk} has no timeline index yet")
    name = stored_name(profile.index_key)
    digest = hashlib.sha256(name.encode()).hexdigest()[:20]
    folder = settings.NPULAB["PROFILE_CACHE_DIR"]
    path = os.path.join(folder, f"{profile.pk}-{digest}.sqlite")
    if os.path.exists(path):
        return path
    storage = artifact_storage()
    if not storage.exists(name):
        raise IndexMissing(f"profile {profile.pk}'s timeline index is not in the storage")
    os.makedirs(folder, exist_ok=True)
    # Copied beside its final name and renamed: two first views never read half a file.
    handle, partial = tempfile.mkstemp(dir=folder, suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as out, storage.open(name, "rb") as source:
            shutil.copyfileobj(source, out, 1 << 20)
        os.replace(partial, path)
    except BaseException:
        if os.path.exists(partial):
            os.remove(partial)
        raise
    # The copies of the profile's earlier indexes (it was summarised again) go.
    for stale in glob.glob(os.path.join(glob.escape(folder), f"{profile.pk}-*.sqlite")):
        if stale != path:
            with contextlib.suppress(OSError):
                os.remove(stale)
    return path
