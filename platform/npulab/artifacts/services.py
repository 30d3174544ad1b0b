"""Every change to artifacts: uploads in chunks, verification, retention, deletion.

A host declares an artifact (name, kind, size, SHA-256), sends its bytes in
chunks at the offsets the platform asks for, and resumes from the offset the
platform last recorded after an outage or a restart. When the last byte is
in, the file is copied to its final key while it is hashed: it is ``stored``
if size and SHA-256 match the declaration, else ``damaged`` and deleted.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import SuspiciousFileOperation
from django.core.files import File
from django.core.files.storage import FileSystemStorage
from django.db import transaction
from django.db.models import F, Sum
from django.utils import timezone
from django.utils.text import get_valid_filename
from rest_framework import status
from rest_framework.exceptions import APIException

from npulab.artifacts.models import Artifact, ArtifactUpload
from npulab.artifacts.signals import artifact_stored
from npulab.artifacts.storage import JoinedReader, artifact_storage
from npulab.core import errors
from npulab.core.text import error_text

# Chunks are spooled to disk past this, so a large chunk never sits in memory.
SPOOL_MEMORY_BYTES = 1 << 20
RETENTION_REASON = "beyond the run's keep_checkpoints"

# The errors are API exceptions so that every endpoint that writes through the
# store (the chunked protocol, the older single-PUT checkpoint upload) answers
# them the same way.


class _StoreError(APIException):
    """An API error whose body keeps its numbers (DRF would turn them into strings)."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body["detail"])
        self.detail = body  # type: ignore[assignment]


class ArtifactTooLarge(_StoreError):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = errors.PAYLOAD_TOO_LARGE

    def __init__(
        self,
        size: int,
        limit: int,
        what: str = "artifact",
        setting: str = "NPULAB_MAX_ARTIFACT_BYTES",
    ) -> None:
        super().__init__(
            {
                "detail": (
                    f"the {what}'s {size} bytes exceed the limit of {limit} bytes ({setting})"
                ),
                "max_bytes": limit,
            }
        )


class NameUnusable(_StoreError):
    """A declared name that sanitises to nothing (``!!``): no file could ever be stored."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = errors.INVALID

    def __init__(self, name: str) -> None:
        super().__init__(
            {
                "detail": "the artifact's name has nothing a file name can keep",
                "name": [
                    f"{name[:100]!r} has no letter, digit, '-', '_' or '.' left as a file name"
                ],
            }
        )


class NoRoom(_StoreError):
    """A declared size that would pass a quota or the free space: refused before a byte."""

    status_code = status.HTTP_507_INSUFFICIENT_STORAGE
    default_code = errors.STORE_FULL

    def __init__(self, detail: str) -> None:
        super().__init__({"detail": detail})


class OffsetMismatch(_StoreError):
    status_code = status.HTTP_409_CONFLICT
    default_code = errors.OFFSET_MISMATCH

    def __init__(self, offset: int, expected: int) -> None:
        super().__init__(
            {
                "detail": f"the chunk starts at byte {offset}; the upload is at byte {expected}",
                "expected_offset": expected,
            }
        )


class StoreFull(_StoreError):
    """The store has no room for the bytes (ENOSPC, a quota): nothing of them was kept.

    The upload stays at its offset, so the host sends the same chunk again later; a 5xx,
    because the request was right and only the platform has to change.
    """

    status_code = status.HTTP_507_INSUFFICIENT_STORAGE
    default_code = errors.STORE_FULL

    def __init__(self, error: OSError, offset: int) -> None:
        super().__init__(
            {
                "detail": (
                    f"the artifact store is full ({error.strerror}); the upload stays at "
                    f"byte {offset} and goes on once there is room"
                ),
                "expected_offset": offset,
            }
        )


class UploadFinished(_StoreError):
    status_code = status.HTTP_409_CONFLICT
    default_code = errors.UPLOAD_FINISHED

    def __init__(self, upload: ArtifactUpload) -> None:
        artifact = upload.artifact
        super().__init__(
            {
                "detail": f"the upload is finished: the artifact is {artifact.status}",
                "status": artifact.status,
                "expected_offset": upload.bytes_received,
            }
        )


def max_artifact_bytes() -> int:
    return int(settings.NPULAB["MAX_ARTIFACT_BYTES"])


# Kinds with a size limit of their own (an app above registers it from its ``ready``):
# kind -> (its NPULAB key, the variable that sets it, what the error calls it).
_KIND_LIMITS: dict[str, tuple[str, str, str]] = {}


def register_size_limit(kind: str, key: str, variable: str, what: str) -> None:
    """Artifacts of ``kind`` may not exceed ``settings.NPULAB[key]`` either."""
    _KIND_LIMITS[kind] = (key, variable, what)


def check_size(kind: str, size: int) -> None:
    """ArtifactTooLarge (413) when ``size`` exceeds the store's limit or the kind's own."""
    limit = max_artifact_bytes()
    if kind in _KIND_LIMITS:
        key, variable, what = _KIND_LIMITS[kind]
        own = int(settings.NPULAB[key])
        if size > own and own <= limit:
            raise ArtifactTooLarge(size, own, what, variable)
    if size > limit:
        raise ArtifactTooLarge(size, limit)


# What a declared artifact holds on to: its bytes count against the quotas until it is
# deleted or given up (damaged), whether they arrived yet or not.
_HOLDING = (Artifact.Status.UPLOADING, Artifact.Status.STORED)


def _declared(artifacts: Any) -> int:
    return artifacts.filter(status__in=_HOLDING).aggregate(total=Sum("bytes"))["total"] or 0


def check_room(run_id: Any, size: int) -> None:
    """NoRoom when ``size`` more bytes would pass the run's quota, the store's, or the free
    space of a local store (less what declared uploads still have to send, and a reserve).

    Before: five 64 GiB declarations were all accepted on a disk with room for none.
    """
    per_run = int(settings.NPULAB["MAX_RUN_ARTIFACT_BYTES"])
    held = _declared(Artifact.objects.filter(run_id=run_id))
    if held + size > per_run:
        raise NoRoom(
            f"the run's artifacts would hold {held + size} bytes, past its quota of "
            f"{per_run} bytes (NPULAB_MAX_RUN_ARTIFACT_BYTES)"
        )
    total = int(settings.NPULAB["MAX_ARTIFACT_STORE_BYTES"])
    if total:
        stored = _declared(Artifact.objects.all())
        if stored + size > total:
            raise NoRoom(
                f"the store would hold {stored + size} bytes, past its quota of {total} bytes "
                "(NPULAB_MAX_ARTIFACT_STORE_BYTES)"
            )
    free = local_free_bytes()
    if free is not None:
        pending = ArtifactUpload.objects.filter(artifact__status=Artifact.Status.UPLOADING)
        owed = pending.aggregate(owed=Sum(F("artifact__bytes") - F("bytes_received")))["owed"]
        owed = owed or 0
        reserve = int(settings.NPULAB["ARTIFACT_FREE_RESERVE_BYTES"])
        if free - owed - reserve < size:
            raise NoRoom(
                "the artifact store is full: its disk has room for "
                f"{max(0, free - owed - reserve)} more bytes "
                f"(keeping {reserve} free, NPULAB_ARTIFACT_FREE_RESERVE_BYTES), not {size}"
            )


def local_free_bytes() -> int | None:
    """Free bytes on a local store's disk; None for a store that is not a local folder."""
    storage = artifact_storage()
    location = getattr(storage, "location", None)
    if not isinstance(storage, FileSystemStorage) or not location:
        return None
    folder = location
    while not os.path.isdir(folder):  # made on the first upload
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
    return shutil.disk_usage(folder).free


def final_key(artifact: Artifact) -> str:
    """Where a stored artifact goes: ``runs/<run>/<kind>s/[<step>/]<name>``."""
    folder = f"runs/{artifact.run_id}/{artifact.kind}s"
    if artifact.step is not None:
        folder += f"/{artifact.step}"
    return f"{folder}/{get_valid_filename(artifact.name)}"


def _part_keys(upload: ArtifactUpload) -> list[str]:
    keys, offset = [], 0
    for size in upload.parts:
        keys.append(_part_key(upload, offset))
        offset += size
    return keys


def _part_key(upload: ArtifactUpload, offset: int) -> str:
    # Zero-padded so a listing sorts them in file order.
    return f"uploads/{upload.pk}/{offset:020d}"


def do_create_upload(
    run: Any,
    attempt: int,
    *,
    name: str,
    kind: str,
    size: int,
    sha256: str,
    step: int | None = None,
) -> ArtifactUpload:
    """Declare an artifact and open its upload at offset 0; 413 past the size limit, 400
    for a name no file can have, 507 past a quota or the free space."""
    check_size(kind, size)
    try:
        get_valid_filename(name)
    except SuspiciousFileOperation:
        raise NameUnusable(name) from None
    run_id = getattr(run, "pk", run)
    with transaction.atomic():
        check_room(run_id, size)
        artifact = Artifact.objects.create(
            run_id=run_id,
            attempt=attempt,
            name=name,
            kind=kind,
            step=step,
            bytes=size,
            sha256=sha256.lower(),
        )
        upload = ArtifactUpload.objects.create(artifact=artifact)
        if size == 0:
            _finish(upload)
    return upload


def do_append_chunk(upload_id: Any, offset: int, chunks: Iterable[bytes]) -> ArtifactUpload:
    """Add the bytes of one chunk at ``offset``; the last one finishes the upload.

    409 with the expected offset when the chunk does not start where the
    upload is (the host asks for the offset and goes on from there). A chunk
    that would run past the declared size makes the artifact ``damaged``.
    """
    try:
        return _append_chunk(upload_id, offset, chunks)
    except StoreFull as full:
        # Said on the artifact outside the chunk's transaction, which rolled back: the
        # run's page shows why its file waits, until a later chunk gets in.
        Artifact.objects.filter(upload__pk=upload_id, status=Artifact.Status.UPLOADING).update(
            status_reason=full.detail["detail"][:500], updated=timezone.now()
        )
        raise


def _append_chunk(upload_id: Any, offset: int, chunks: Iterable[bytes]) -> ArtifactUpload:
    with transaction.atomic():
        upload = (
            ArtifactUpload.objects.select_for_update().select_related("artifact").get(pk=upload_id)
        )
        if upload.finished:
            raise UploadFinished(upload)
        if offset != upload.bytes_received:
            raise OffsetMismatch(offset, upload.bytes_received)
        artifact = upload.artifact
        remaining = artifact.bytes - upload.bytes_received
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES) as spool:
            count = 0
            for data in chunks:
                count += len(data)
                if count > remaining:
                    _damage(
                        upload,
                        f"upload of more than the declared {artifact.bytes} bytes",
                    )
                    return upload
                spool.write(data)
            if count == 0:
                return upload
            spool.seek(0)
            storage = artifact_storage()
            key = _part_key(upload, offset)
            # A chunk written before a crash, but never recorded, is sent again.
            if storage.exists(key):
                storage.delete(key)
            _save(storage, key, File(spool, name=key.rsplit("/", 1)[-1]), offset)
        upload.bytes_received += count
        upload.parts = [*upload.parts, count]
        upload.save(update_fields=["bytes_received", "parts", "updated"])
        if artifact.status_reason:
            artifact.status_reason = ""  # the store took this chunk: no longer full
            artifact.save(update_fields=["status_reason", "updated"])
        if upload.bytes_received == artifact.bytes:
            _finish(upload, offset)
    return upload


def _save(storage: Any, key: str, content: File, offset: int) -> str:
    """``storage.save``; StoreFull when the store has no room, leaving no partial file.

    The name is chosen first so that only this write's file is removed: an earlier
    attempt's artifact may hold ``key`` itself.
    """
    name = storage.get_available_name(key)
    try:
        return storage.save(name, content)
    except OSError as error:
        if error.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        if storage.exists(name):
            storage.delete(name)
        raise StoreFull(error, offset) from error


def _finish(upload: ArtifactUpload, offset: int = 0) -> None:
    """Copy the chunks to the artifact's key while hashing them; keep it only if it matches.

    ``offset`` is where the upload stands if the store has no room for the copy.
    """
    artifact = upload.artifact
    storage = artifact_storage()
    digest = hashlib.sha256()
    total = 0

    def observe(data: bytes) -> None:
        nonlocal total
        digest.update(data)
        total += len(data)

    key = final_key(artifact)
    with JoinedReader(storage, _part_keys(upload), observe) as reader:
        name = _save(storage, key, File(reader, name=key.rsplit("/", 1)[-1]), offset)
    _delete_parts(upload)
    if total != artifact.bytes or digest.hexdigest() != artifact.sha256:
        storage.delete(name)
        _damage(
            upload,
            f"upload of {total} bytes does not match the declared {artifact.bytes} bytes "
            "and SHA-256",
        )
        return
    artifact.status = Artifact.Status.STORED
    artifact.status_reason = ""
    artifact.storage_key = name
    artifact.save(update_fields=["status", "status_reason", "storage_key", "updated"])
    # A later attempt that saves the same thing again replaces it.
    replaced = Artifact.objects.filter(
        run_id=artifact.run_id,
        kind=artifact.kind,
        step=artifact.step,
        name=artifact.name,
        status=Artifact.Status.STORED,
    ).exclude(pk=artifact.pk)
    for older in replaced:
        _delete(older, "replaced by a later upload")
    artifact_stored.send(sender=Artifact, artifact=artifact)


def do_damage_upload(upload: ArtifactUpload, reason: str) -> ArtifactUpload:
    """Give up an unfinished upload: its chunks go, the artifact is ``damaged``."""
    with transaction.atomic():
        upload = (
            ArtifactUpload.objects.select_for_update().select_related("artifact").get(pk=upload.pk)
        )
        if not upload.finished:
            _damage(upload, reason)
    return upload


def _damage(upload: ArtifactUpload, reason: str) -> None:
    _delete_parts(upload)
    artifact = upload.artifact
    artifact.status = Artifact.Status.DAMAGED
    artifact.status_reason = reason[:500]
    artifact.save(update_fields=["status", "status_reason", "updated"])


def _delete_parts(upload: ArtifactUpload) -> None:
    storage = artifact_storage()
    for key in _part_keys(upload):
        storage.delete(key)


def _delete(artifact: Artifact, reason: str) -> None:
    key = artifact.storage_key
    artifact.status = Artifact.Status.DELETED
    artifact.status_reason = reason[:500]
    artifact.save(update_fields=["status", "status_reason", "updated"])
    # A store that overwrites (S3) may have put a newer artifact at the same key.
    if (
        key
        and not Artifact.objects.filter(storage_key=key)
        .exclude(status=Artifact.Status.DELETED)
        .exists()
    ):
        artifact_storage().delete(key)


def do_pin_artifact(artifact: Artifact, pinned: bool) -> Artifact:
    """Pin (kept whatever the retention says) or unpin; unpinning may not delete at once."""
    artifact.pinned = pinned
    artifact.save(update_fields=["pinned", "updated"])
    return artifact


def retention_drops(artifacts: Iterable[Artifact], keep_checkpoints: int) -> list[Artifact]:
    """The retention policy: which of a run's stored artifacts go.

    Checkpoints: all but those of the newest ``keep_checkpoints`` steps (a checkpoint
    sharded across ranks is a file per rank, one step), and never a pinned one. Every
    other kind is kept.
    """
    checkpoints = sorted(
        (
            a
            for a in artifacts
            if a.kind == Artifact.Kind.CHECKPOINT and a.status == Artifact.Status.STORED
        ),
        key=lambda a: (a.step if a.step is not None else -1, a.created, a.pk),
        reverse=True,
    )
    steps = list(dict.fromkeys(a.step for a in checkpoints))
    kept = set(steps[: max(keep_checkpoints, 0)])
    return [a for a in checkpoints if a.step not in kept and not a.pinned]


@transaction.atomic
def do_apply_retention(run: Any, keep_checkpoints: int) -> list[Artifact]:
    """Delete what the retention policy drops from a run's stored artifacts; return those."""
    run_id = getattr(run, "pk", run)
    stored = Artifact.objects.select_for_update().filter(
        run_id=run_id, status=Artifact.Status.STORED
    )
    dropped = retention_drops(stored, keep_checkpoints)
    for artifact in dropped:
        _delete(artifact, RETENTION_REASON)
    return dropped


def open_artifact(artifact: Artifact) -> File:
    """A stored artifact's file, opened for reading from the storage."""
    return artifact_storage().open(artifact.storage_key, "rb")


VERIFY_CHUNK = 1 << 20


def do_verify_stored(artifact: Artifact) -> bool:
    """Whether a stored artifact's file still has its size and SHA-256; if not, it is damaged.

    A file can change after its upload verified it (a disk, a hand, a restore from an
    old backup): what is served or resumed from is read once more first, so a bad copy
    is never handed out as good. A damaged one keeps its row, with the reason.
    """
    if artifact.status != Artifact.Status.STORED:
        return False
    digest = hashlib.sha256()
    total = 0
    try:
        with open_artifact(artifact) as handle:
            while chunk := handle.read(VERIFY_CHUNK):
                digest.update(chunk)
                total += len(chunk)
    except OSError as error:
        problem = f"the stored file cannot be read: {error_text(error)}"
    else:
        if total == artifact.bytes and digest.hexdigest() == artifact.sha256:
            return True
        problem = (
            f"the stored file ({total} bytes) no longer matches its {artifact.bytes} bytes "
            "and SHA-256"
        )
    artifact.status = Artifact.Status.DAMAGED
    artifact.status_reason = problem[:500]
    artifact.save(update_fields=["status", "status_reason", "updated"])
    return False


def do_expire_uploads(max_age_s: int) -> int:
    """Give up uploads no chunk has reached for ``max_age_s``: their chunks would stay forever."""
    cutoff = timezone.now() - timedelta(seconds=max_age_s)
    stale = ArtifactUpload.objects.filter(
        artifact__status=Artifact.Status.UPLOADING, updated__lt=cutoff
    ).select_related("artifact")
    count = 0
    for upload in stale:
        do_damage_upload(upload, f"upload abandoned: no chunk for {max_age_s} s")
        count += 1
    return count


def on_artifact_deleted(instance: Artifact, **kwargs: Any) -> None:
    """A deleted row (its run was deleted) takes its file along, once the deletion commits."""
    key = instance.storage_key
    if not key or instance.status == Artifact.Status.DELETED:
        return

    def delete_file() -> None:
        if (
            not Artifact.objects.filter(storage_key=key)
            .exclude(status=Artifact.Status.DELETED)
            .exists()
        ):
            artifact_storage().delete(key)

    transaction.on_commit(delete_file)


def on_upload_deleted(instance: ArtifactUpload, **kwargs: Any) -> None:
    """A deleted upload takes its waiting chunks along, once the deletion commits."""
    keys = _part_keys(instance)
    if keys:
        storage = artifact_storage()
        transaction.on_commit(lambda: [storage.delete(key) for key in keys])
