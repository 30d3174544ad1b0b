"""Moving a run's checkpoints between this host and the platform.

Checkpoints are written on the host (workers.track) into a directory shared by
every attempt of the run here. The uploader sends each new one to the
platform as soon as its event has been forwarded, in chunks through the
artifact store (workers.host.uploads), so a restarted attempt can resume on
another host; ``fetch_for_resume`` brings the platform's newest one
here when this host does not have it. A checkpoint sharded across the ranks has each
rank's shard in that rank's folder (``rank-3/``, workers.track.checkpoint): each host
uploads the shards of its ranks (``rank3-state.pt``) and fetches them to resume.
``CheckpointsOnHost`` is the checkpoints capability's host side
(workers.host.capabilities).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from typing import Any

from workers.contract import script_env
from workers.contract.capabilities import CHECKPOINTS, PINNED, RESUME_POINT, SHARDS
from workers.contract.events import CHECKPOINT, RUNNER
from workers.contract.gang import GANG
from workers.contract.ranks import rank_file
from workers.events import EventWriter
from workers.host.capabilities import Attempt, AttemptCapability, register
from workers.host.client import PlatformClient, PlatformRejected, PlatformUnavailable
from workers.host.serial import Serial
from workers.host.uploads import CHUNK_BYTES, ChunkedUpload, UploadRefused, UploadStopped
from workers.safefiles import drop_links, held, read_text, real_dir
from workers.track import checkpoint as checkpoints

log = logging.getLogger(__name__)
# A resume fetch that meets a dropped connection or a 5xx tries again, waiting 1, 2, 4 s:
# a shard left behind would start the attempt without it. Longer outages end the fetch
# with its reason, and the attempt goes on as the claim allows.
FETCH_TRIES = 4
FETCH_FIRST_DELAY_S = 1.0


class CheckpointUploader:
    """Uploads checkpoints one after another beside the run; ``drain`` waits for them."""

    def __init__(
        self,
        client: PlatformClient,
        run_id: int,
        directory: str,
        chunk_bytes: int = CHUNK_BYTES,
        give_up: threading.Event | None = None,
    ) -> None:
        """``give_up``: set, the upload under way and those queued stop (the worker shuts
        down; its next start's sweep sends them)."""
        self.client = client
        self.run_id = run_id
        self.directory = directory
        self.chunk_bytes = chunk_bytes
        # (step, rank): rank 0's checkpoints, or a rank's shards of sharded ones.
        self._serial = Serial(lambda item: self._upload(*item), f"upload-{run_id}")
        self._give_up = give_up or threading.Event()
        # An upload stopped by ``give_up``: not done, though nothing waits any more.
        self._stopped = False

    def add(self, step: int, rank: int = 0) -> None:
        self._serial.add((step, rank))

    def sweep(self) -> list[tuple[int, int]]:
        """Queue every checkpoint and shard here not yet uploaded; returns (step, rank)s.

        Called once the attempt's events are all stored, so the platform knows each of
        them: this catches the ones whose events the forwarder skipped (a resync past a
        lost reply) and those an earlier worker process left unsent.
        """
        found = []
        for rank in _ranks_here(self.directory):
            try:
                with held(self.directory, *_shard_names(rank)) as folder:
                    steps = checkpoints.complete(folder)
                    found += [(s, rank) for s in steps if not checkpoints.settled(folder, s)]
            except OSError as exc:
                log.warning("run %s: rank %s's checkpoints skipped: %s", self.run_id, rank, exc)
        for step, rank in found:
            self.add(step, rank)
        return found

    def drain(self) -> bool:
        """Wait until every queued checkpoint is uploaded; False if ``give_up`` came first."""
        return self._serial.wait_idle(self._give_up) and not self._stopped

    def _upload(self, step: int, rank: int = 0) -> None:
        """Send one checkpoint (a shard of ``rank``'s): its folders are held open, and none
        is followed where the run left a link (it could lead to another run's)."""
        shard = _shard_names(rank)
        name = checkpoints.step_dir_name(step)
        try:
            # Two walks from the top: a held folder's /proc path is a link itself.
            with held(self.directory, *shard) as folder, held(
                self.directory, *shard, name
            ) as saved:
                self._send(step, rank, folder, saved)
        except FileNotFoundError:
            log.info("run %s: checkpoint %s is gone before its upload", self.run_id, step)
        except OSError as exc:
            log.warning("run %s: checkpoint %s not uploaded: %s", self.run_id, step, exc)

    def _send(self, step: int, rank: int, folder: str, saved: str) -> None:
        name = checkpoints.step_dir_name(step)
        path = os.path.join(saved, checkpoints.STATE_FILE)
        if not os.path.exists(path):
            log.info("run %s: checkpoint %s is gone before its upload", self.run_id, step)
            return
        upload = ChunkedUpload(
            self.client,
            self.run_id,
            path,
            _declaration(saved, step, rank),
            # Beside the step directories, where workers.track's retention never looks.
            state_path=os.path.join(folder, f".upload-{name}.json"),
            chunk_bytes=self.chunk_bytes,
            give_up=self._give_up,
            shown=os.path.join(self.directory, *_shard_names(rank), name, checkpoints.STATE_FILE),
        )
        if checkpoints.settled(folder, step):
            return  # queued twice (its event, then a sweep): sent already
        try:
            upload.run()
            log.info("run %s: checkpoint %s stored on the platform", self.run_id, step)
            checkpoints.settle(folder, step)
        except UploadRefused as exc:
            # Refused for good (too large, damaged): holding it back from retention would
            # only fill the disk.
            log.warning("run %s: checkpoint %s not stored: %s", self.run_id, step, exc)
            checkpoints.settle(folder, step)
        except OSError as exc:
            # Deleted meanwhile (by hand: retention holds what is not uploaded).
            log.warning("run %s: checkpoint %s not stored: %s", self.run_id, step, exc)
        except UploadStopped:
            self._stopped = True
            log.info("run %s: checkpoint %s upload stopped; it resumes later", self.run_id, step)


def _shard_names(rank: int) -> tuple[str, ...]:
    """The folders under the checkpoint directory that hold ``rank``'s checkpoints."""
    return (checkpoints.SHARD_DIR.format(rank=rank),) if rank else ()


def _ranks_here(directory: str) -> list[int]:
    """Rank 0 and the ranks with a shard folder in ``directory``; none if it is a link."""
    try:
        with held(directory) as folder:
            return [0, *checkpoints.shard_ranks(folder)]
    except OSError:
        return []


def _declaration(saved: str, step: int, rank: int = 0) -> dict[str, Any]:
    """The checkpoint in the folder ``saved`` as its manifest (the source of its event)
    describes it; a shard's is named for its rank."""
    declaration: dict[str, Any] = {
        "name": rank_file(checkpoints.STATE_FILE, rank),
        "kind": "checkpoint",
        "step": step,
    }
    try:
        manifest = read_text(os.path.join(saved, checkpoints.MANIFEST_FILE))
        described = json.loads(manifest)["files"][checkpoints.STATE_FILE]
        declaration.update(bytes=int(described["bytes"]), sha256=str(described["sha256"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass  # ChunkedUpload hashes the file itself
    return declaration


def apply_pins(directory: str, steps: list[int]) -> None:
    """Keep the steps the platform pinned out of the host's own retention (each rank's
    shards of them too)."""
    for rank in _ranks_here(directory):
        try:
            with held(directory, *_shard_names(rank)) as folder:
                if set(steps) != checkpoints.pinned(folder):
                    checkpoints.set_pinned(folder, set(steps))
        except OSError as exc:
            log.warning("pins of %s's rank %s not kept: %s", directory, rank, exc)


def fetch_for_resume(
    client: PlatformClient,
    run_id: int,
    directory: str,
    resume: dict[str, Any] | None,
    ranks: range | None = None,
) -> str:
    """Make sure the checkpoint a new attempt resumes from is here, and of a sharded one
    the shards of this host's ``ranks`` (None: every shard); say what happened."""
    if not resume:
        return "no stored checkpoint: the run starts from the beginning"
    step = int(resume["step"])
    notes = [_fetch(client, run_id, directory, step, 0, resume)]
    for shard in resume.get(SHARDS) or []:
        rank = int(shard["rank"])
        if ranks is None or rank in ranks:
            folder = checkpoints.shard_dir(directory, rank)
            notes.append(_fetch(client, run_id, folder, step, rank, shard))
    return "; ".join(notes)


def _fetch(
    client: PlatformClient,
    run_id: int,
    directory: str,
    step: int,
    rank: int,
    described: dict[str, Any],
) -> str:
    what = f"checkpoint of step {step}" + (f" (rank {rank}'s shard)" if rank else "")
    # Written as root into a folder an earlier attempt's user wrote: not through its links.
    real_dir(directory)
    drop_links(directory, [checkpoints.step_dir_name(step)])
    try:
        checkpoints.verify(directory, step)
        return f"{what} is on this host"
    except ValueError:
        pass
    temporary = os.path.join(directory, f".{checkpoints.step_dir_name(step)}.tmp-{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    os.makedirs(temporary)
    try:
        target = os.path.join(temporary, checkpoints.STATE_FILE)
        _download(client, run_id, step, target, rank)
        manifest = {
            "format": checkpoints.FORMAT,
            "step": step,
            "files": {
                checkpoints.STATE_FILE: {
                    "bytes": described["bytes"],
                    "sha256": described["sha256"],
                }
            },
        }
        with open(os.path.join(temporary, checkpoints.MANIFEST_FILE), "w") as handle:
            json.dump(manifest, handle)
        final = os.path.join(directory, checkpoints.step_dir_name(step))
        shutil.rmtree(final, ignore_errors=True)
        os.rename(temporary, final)
        checkpoints.verify(directory, step)
        # It came from the platform: nothing to upload.
        checkpoints.settle(directory, step)
    except (PlatformUnavailable, PlatformRejected, OSError, ValueError) as exc:
        shutil.rmtree(temporary, ignore_errors=True)
        return f"could not fetch the {what}: {exc}"
    return f"fetched the {what} from the platform"


def _download(client: PlatformClient, run_id: int, step: int, target: str, rank: int) -> None:
    delay = FETCH_FIRST_DELAY_S
    for tries_left in range(FETCH_TRIES - 1, -1, -1):
        try:
            client.download_checkpoint(run_id, step, target, rank)
            return
        except PlatformUnavailable as exc:
            if not tries_left:
                raise
            log.warning("run %s: fetch of checkpoint %s waits: %s", run_id, step, exc)
            time.sleep(delay)
            delay *= 2


@register
class CheckpointsOnHost(AttemptCapability):
    """Checkpoints in a directory shared by the run's attempts on this host; each one the
    platform acknowledged is uploaded; a new attempt's resume point is fetched first."""

    name = CHECKPOINTS
    acted_on = (CHECKPOINT,)

    def __init__(self, attempt: Attempt) -> None:
        super().__init__(attempt)
        # Shared by the run's attempts on this host: a restart resumes from it.
        self.directory = os.path.join(attempt.work_dir, "checkpoints")
        self.uploader = CheckpointUploader(
            attempt.client, attempt.run_id, self.directory, give_up=attempt.give_up
        )

    def directories(self) -> list[str]:
        return [self.directory]

    def env(self) -> dict[str, str]:
        env = {script_env.CHECKPOINT_DIR: self.directory}
        resume = self.attempt.claim.get(RESUME_POINT)
        if resume:
            # Where every rank of a sharded checkpoint resumes: the step whose every shard
            # the platform has, not a newer one some rank saved before the attempt ended.
            env[script_env.RESUME_STEP] = str(int(resume["step"]))
        return env

    def prepare(self, events: EventWriter) -> None:
        resume = self.attempt.claim.get(RESUME_POINT)
        if resume is not None:
            attempt = self.attempt
            note = fetch_for_resume(
                attempt.client, attempt.run_id, self.directory, resume, self._ranks()
            )
            events.log(RUNNER, f"attempt {attempt.attempt}: {note}")

    def _ranks(self) -> range | None:
        """The global ranks this host runs (its shards to fetch); None when the claim says
        nothing of them (an older platform): every shard."""
        gang = self.attempt.claim.get(GANG) or {}
        first, count = gang.get("first_rank"), gang.get("local_world_size")
        if not isinstance(first, int) or not isinstance(count, int):
            return None
        return range(first, first + count)

    def acknowledged(self, events: list[dict[str, Any]], reply: dict[str, Any]) -> None:
        """Queue the acknowledged checkpoints (and shards) for upload; keep what the
        platform pinned."""
        for event in events:
            if event.get("type") == CHECKPOINT and isinstance(event.get("step"), int):
                rank = event.get("rank")
                self.uploader.add(event["step"], rank if isinstance(rank, int) else 0)
        pinned = reply.get(PINNED)
        if isinstance(pinned, list):
            apply_pins(self.directory, pinned)

    def finish(self) -> bool:
        """A new attempt, perhaps on another host, resumes from what is stored."""
        self.uploader.sweep()
        if not self.uploader.drain():
            log.warning("run %s: shutting down with checkpoints not uploaded", self.attempt.run_id)
            return False
        return True
