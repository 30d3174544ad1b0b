"""Where artifact files live: the ``artifacts`` entry of Django's STORAGES.

Local by default (a directory, NPULAB_ARTIFACT_DIR); any S3-compatible store
through django-storages when NPULAB_ARTIFACT_STORAGE=s3. Code here talks to
the Storage API only, so both behave the same.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.files.storage import FileSystemStorage, Storage, storages

ALIAS = "artifacts"


def artifact_storage() -> Storage:
    return storages[ALIAS]


class LocalArtifactStorage(FileSystemStorage):
    """A directory; NPULAB["ARTIFACT_DIR"] unless ``location`` is given.

    The directory is read when used rather than once, so a deployment's (or a
    test's) override of NPULAB["ARTIFACT_DIR"] applies to a storage already made.
    """

    @property  # type: ignore[override]
    def base_location(self) -> str:
        return self._location or settings.NPULAB["ARTIFACT_DIR"]

    @property  # type: ignore[override]
    def location(self) -> str:
        return os.path.abspath(self.base_location)

    def delete(self, name: str) -> None:
        super().delete(name)
        # Empty folders would pile up by the thousand (one per run and step).
        root = self.location
        folder = os.path.dirname(self.path(name))
        while folder.startswith(root + os.sep):
            try:
                os.rmdir(folder)
            except OSError:
                return
            folder = os.path.dirname(folder)


class JoinedReader(io.RawIOBase):
    """The storage files ``names``, read one after another as one stream.

    ``observe`` sees every block read, which is how the whole file is hashed
    while it is copied to its final place, in one pass.
    """

    def __init__(
        self, storage: Storage, names: Iterable[str], observe: Callable[[bytes], Any]
    ) -> None:
        self._storage = storage
        self._names = iter(names)
        self._observe = observe
        self._current: Any = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while True:
            if self._current is None:
                name = next(self._names, None)
                if name is None:
                    return 0
                self._current = self._storage.open(name, "rb")
            data = self._current.read(len(buffer))
            if data:
                buffer[: len(data)] = data
                self._observe(data)
                return len(data)
            self._current.close()
            self._current = None

    def close(self) -> None:
        if self._current is not None:
            self._current.close()
            self._current = None
        super().close()
