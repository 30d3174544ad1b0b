"""Every change to profiles: made from a stored trace, imported, summarised and indexed.

A captured trace arrives as an artifact of kind ``trace`` (the host worker uploads what
the run announced); an imported one is stored through the same artifact store. Either
way the store's ``artifact_stored`` signal makes the profile, ``pending``, and on commit
a control-queue task summarises it (``npulab.profiles.summary.summarise``) and builds its
timeline index (``npulab.profiles.timeline.build_index``): ``ready``, or ``failed`` with
the reason.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import IO, Any

from django.conf import settings
from django.core.files import File
from django.db import transaction
from django.utils import timezone

from npulab.artifacts.models import Artifact
from npulab.artifacts.services import do_append_chunk, do_create_upload, open_artifact
from npulab.artifacts.storage import artifact_storage
from npulab.celery import app
from npulab.profiles import traces
from npulab.profiles.models import Profile
from npulab.profiles.traces import PreparedTrace, TraceRefused
from workers.contract.events import ASCEND, KINETO, TRACE, trace_format
from workers.contract.ranks import file_rank
from workers.contract.tasks import CONTROL_QUEUE, SUMMARISE_PROFILE

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 2000
# A profile "summarising" for longer than this lost its worker; it may be asked for again.
STALE_SUMMARY_S = 3600
# Set while an import stores its trace: the profile the signal makes is an imported one.
_importing: ContextVar[dict[str, Any] | None] = ContextVar("profile_import", default=None)


def on_artifact_stored(artifact: Artifact, **kwargs: Any) -> None:
    """The artifact store's ``artifact_stored``: a stored trace becomes a pending profile."""
    if artifact.kind != TRACE:
        return
    do_create_profile(artifact, **(_importing.get() or {}))


def do_create_profile(
    artifact: Artifact, source: str = Profile.Source.CAPTURED, uploaded_by: Any = None
) -> Profile:
    """The profile of a stored trace (once per artifact); its summary is asked for on commit."""
    # A script's own trace may come uncompressed.
    fmt = trace_format(artifact.name) or (KINETO if artifact.name.endswith(".json") else None)
    problem = ""
    if fmt is None:
        # A script may announce any file as a trace; say what npulab reads instead of guessing.
        fmt = ASCEND if artifact.name.endswith(".tar") else KINETO
        problem = (
            f"{artifact.name!r} is not a trace npulab reads: a Kineto trace is *.json or "
            "*.json.gz, an ascend_pt folder *.tar.gz"
        )
    profile, created = Profile.objects.get_or_create(
        artifact=artifact,
        defaults={
            "run_id": artifact.run_id,
            "name": artifact.name,
            "rank": file_rank(artifact.name),
            "source": source,
            "format": fmt,
            "bytes": artifact.bytes,
            "uploaded_by": uploaded_by,
            "status": Profile.Status.FAILED if problem else Profile.Status.PENDING,
            "error": problem,
        },
    )
    # A later attempt's trace of the same name replaced the earlier one's file.
    replaced = Profile.objects.filter(
        run_id=artifact.run_id, artifact__status=Artifact.Status.DELETED
    )
    replaced.delete()
    if created and not problem:
        transaction.on_commit(lambda: request_summary(profile.pk))
    return profile


def request_summary(profile_id: int) -> None:
    try:
        app.send_task(SUMMARISE_PROFILE, args=[profile_id], queue=CONTROL_QUEUE)
    except Exception:
        # The profile stays pending; POST /api/v1/profiles/<id>/summarise/ asks again.
        log.exception("could not ask for the summary of profile %s", profile_id)


def do_resummarise_profile(profile: Profile) -> Profile:
    """Ask for the profile's summary and index again (after a failure, or a newer npulab).

    One being made is left alone, unless its worker has been at it so long that it died.
    """
    with transaction.atomic():
        locked = Profile.objects.select_for_update().get(pk=profile.pk)
        stale = timezone.now() - timedelta(seconds=STALE_SUMMARY_S)
        if locked.status != Profile.Status.SUMMARISING or locked.updated < stale:
            locked.status = Profile.Status.PENDING
            locked.error = ""
            locked.save(update_fields=["status", "error", "updated"])
            transaction.on_commit(lambda: request_summary(locked.pk))
    return locked


def outdated_profiles() -> Any:
    """The ready profiles an older npulab summarised (``summary.version`` below this one's):
    their numbers are what that version computed."""
    from npulab.profiles.summary import SUMMARY_VERSION

    return Profile.objects.filter(
        status=Profile.Status.READY, summary__version__lt=SUMMARY_VERSION
    ).order_by("pk")


def sweep_stale_profiles(now: datetime | None = None) -> int:
    """End the profiles left ``summarising`` past ``STALE_SUMMARY_S``: their worker died (a
    summary never takes that long), and nothing else would ever move them. They become
    ``failed`` with the reason, and may be asked for again. Returns how many."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=STALE_SUMMARY_S)
    return Profile.objects.filter(status=Profile.Status.SUMMARISING, updated__lt=stale).update(
        status=Profile.Status.FAILED,
        error=(
            f"the summary was still being made after {STALE_SUMMARY_S // 60} min: its worker "
            "stopped; ask for it again"
        ),
        updated=now,
    )


def unique_name(run: Any, name: str) -> str:
    """``name``, or ``<stem>-2<suffix>`` ...: an import never replaces a stored trace."""
    fmt = trace_format(name)
    suffix = traces.TRACE_SUFFIXES[fmt] if fmt else ""
    stem = name[: -len(suffix)] if suffix else name
    taken = set(
        Artifact.objects.filter(run=run, kind=TRACE)
        .exclude(status=Artifact.Status.DELETED)
        .values_list("name", flat=True)
    )
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        candidate = f"{stem}-{number}{suffix}"
    return candidate


def do_import_profile(run: Any, source: IO[bytes], name: str, size: int, user: Any) -> Profile:
    """Store an uploaded trace on ``run`` and make its profile; TraceRefused if it is none.

    Nothing is kept of a refused trace: the scratch copy goes, and the artifact's rows and
    files go with the transaction.
    """
    work_dir = _work_dir("import-")
    try:
        prepared = traces.prepare_import(source, name, size, work_dir)
        prepared.name = unique_name(run, prepared.name)
        with transaction.atomic():
            artifact = _store(run, prepared, user)
            if artifact.status != Artifact.Status.STORED:
                raise TraceRefused(f"the trace was not stored: {artifact.status_reason}")
            profile = Profile.objects.get(artifact=artifact)
            if prepared.raw_bytes:
                profile.raw_bytes = prepared.raw_bytes
                profile.save(update_fields=["raw_bytes", "updated"])
        return profile
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _store(run: Any, prepared: PreparedTrace, user: Any) -> Artifact:
    token = _importing.set({"source": Profile.Source.IMPORTED, "uploaded_by": user})
    try:
        upload = do_create_upload(
            run,
            run.attempt,
            name=prepared.name,
            kind=TRACE,
            size=prepared.bytes,
            sha256=prepared.sha256,
        )
        if prepared.bytes:
            with open(prepared.path, "rb") as handle:
                upload = do_append_chunk(upload.pk, 0, iter(lambda: handle.read(traces.BLOCK), b""))
        upload.artifact.refresh_from_db()
        return upload.artifact
    finally:
        _importing.reset(token)


def _work_dir(prefix: str) -> str:
    root = settings.NPULAB["PROFILE_WORK_DIR"]
    os.makedirs(root, exist_ok=True)
    return tempfile.mkdtemp(prefix=prefix, dir=root)


@contextlib.contextmanager
def local_trace(profile: Profile) -> Iterator[tuple[str, int]]:
    """The profile's trace unpacked on this machine, and its unpacked size, while in use.

    A Kineto trace as a plain ``.json`` file, an ascend profile as its folder; the unpacked
    limit holds while it is read from storage.
    """
    work_dir = _work_dir(f"profile-{profile.pk}-")
    try:
        with open_artifact(profile.artifact) as stored:
            if profile.format == ASCEND:
                unpacked = os.path.join(work_dir, "trace")
                os.makedirs(unpacked)
                size = traces.extract_tar(stored, unpacked)
                yield traces.ascend_folder(unpacked), size
            else:
                path = os.path.join(work_dir, "trace.json")
                if profile.name.endswith(".gz"):
                    size = traces.gunzip_to(stored, path)
                else:
                    size = traces.copy_to(stored, path)
                yield path, size
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _claim(profile_id: int, again: bool) -> Profile | None:
    """Mark the profile ``summarising`` if it waits for that (any, ``again``); else None."""
    with transaction.atomic():
        profile = (
            Profile.objects.select_for_update().select_related("artifact").filter(pk=profile_id)
        ).first()
        if profile is None:
            return None
        if profile.status != Profile.Status.PENDING and not again:
            return None
        profile.status = Profile.Status.SUMMARISING
        profile.error = ""
        profile.save(update_fields=["status", "error", "updated"])
        return profile


def do_summarise_profile(profile_id: int, again: bool = False) -> Profile | None:
    """Summarise and index a pending profile (a ready or failed one too with ``again``).

    Deleted meanwhile, or taken by another worker: nothing happens (None). Any failure
    leaves the profile ``failed`` with the reason and no index behind.
    """
    from npulab.profiles.summary import summarise
    from npulab.profiles.timeline import INDEX_NAME, build_index

    profile = _claim(profile_id, again)
    if profile is None:
        return None
    index_key = f"profiles/{profile.pk}/{secrets.token_hex(6)}"
    index_name = f"{index_key}/{INDEX_NAME}"
    storage = artifact_storage()
    try:
        if profile.artifact.status != Artifact.Status.STORED:
            raise TraceRefused(f"the trace is {profile.artifact.status}, not stored")
        with local_trace(profile) as (path, raw_bytes):
            summary = summarise(path)
            index_dir = tempfile.mkdtemp(prefix="index-", dir=os.path.dirname(path))
            facts = build_index(path, index_dir)
            facts.pop("path", None)  # the scratch file, gone in a moment
            with open(os.path.join(index_dir, INDEX_NAME), "rb") as built:
                saved = storage.save(index_name, File(built, name=INDEX_NAME))
    except Exception as exc:
        with contextlib.suppress(Exception):
            storage.delete(index_name)
        log.warning("profile %s could not be summarised: %s", profile_id, exc, exc_info=True)
        reason = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc)
        return _end(profile_id, Profile.Status.FAILED, error=reason[:MAX_ERROR_CHARS])
    if saved != index_name:  # a store that renames on a clash: keep what it said
        index_key = saved.rsplit("/", 1)[0]
    return _end(
        profile_id,
        Profile.Status.READY,
        summary=summary,
        index=facts,
        index_key=index_key,
        raw_bytes=raw_bytes,
        ready_at=timezone.now(),
    )


def _end(profile_id: int, status: str, **fields: Any) -> Profile | None:
    """Record the outcome; the index an earlier summary left is deleted once replaced."""
    with transaction.atomic():
        profile = Profile.objects.select_for_update().filter(pk=profile_id).first()
        if profile is None:  # deleted meanwhile: its new index must not stay behind
            if fields.get("index_key"):
                delete_index(fields["index_key"])
            return None
        old_key = profile.index_key
        profile.status = status
        if status == Profile.Status.FAILED:
            fields.setdefault("index_key", "")
            fields.setdefault("index", {})
        for name, value in fields.items():
            setattr(profile, name, value)
        profile.save()
    if old_key and old_key != profile.index_key:
        delete_index(old_key)
    return profile


def delete_index(index_key: str) -> None:
    from npulab.profiles.timeline import INDEX_NAME

    with contextlib.suppress(Exception):
        artifact_storage().delete(f"{index_key}/{INDEX_NAME}")


def on_profile_deleted(instance: Profile, **kwargs: Any) -> None:
    """A deleted profile (its run deleted) takes its index along, once the deletion commits."""
    if instance.index_key:
        key = instance.index_key
        transaction.on_commit(lambda: delete_index(key))
