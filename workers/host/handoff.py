"""Files a run's other hosts handed over, fetched into this host's run directory: the
handoff capability's host side (workers.host.capabilities).

The handing side needs nothing here: its run writes an ``artifact`` event of kind
``handoff``, which the artifact uploader sends like any other. On the receiving side every
events acknowledgement of a run on several hosts lists the attempt's stored handoff files;
each one this host did not hand over itself is fetched once, in a thread of its own (a
large dump must not hold up the run's events), checked against its SHA-256 and put in
``<run dir>/handoff/`` under its name, whole or not at all (written aside, then renamed),
where the run waits for it. One that cannot be fetched leaves a note beside its name
(``<name>.failed``) saying why, so that the run ends saying so, not at its timeout.

While the run lives its directory is the run user's, so the worker (root, then) never
follows a path through it: it holds each folder from its own ``runs/`` down by a
descriptor that refuses a symbolic link. Standard library only, Python 3.8.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
from typing import Any, Callable

from workers.contract import script_env
from workers.contract.capabilities import (
    HANDOFF,
    HANDOFF_DIR_NAME,
    HANDOFF_FAILED,
    HANDOFF_FILES,
)
from workers.contract.events import ARTIFACT
from workers.host.capabilities import Attempt, AttemptCapability, register
from workers.host.client import PlatformRejected, PlatformUnavailable
from workers.safefiles import open_beneath

log = logging.getLogger(__name__)

# A file whose bytes do not match its SHA-256 is fetched again, this many times in all.
FETCH_TRIES = 3
RETRY_MAX_S = 30.0


@register
class HandoffOnHost(AttemptCapability):
    """Fetch what the attempt's other hosts handed over into the run's handoff folder."""

    name = HANDOFF
    acted_on = (ARTIFACT,)

    def __init__(self, attempt: Attempt) -> None:
        super().__init__(attempt)
        self.directory = os.path.join(attempt.run_dir, HANDOFF_DIR_NAME)
        # The names this host handed over: the listing has them too, never fetched back.
        self._handed: set[str] = set()
        self._taken: set[int] = set()
        self._over = threading.Event()

    def directories(self) -> list[str]:
        return [self.directory]

    def env(self) -> dict[str, str]:
        return {script_env.HANDOFF_DIR: self.directory}

    def acknowledged(self, events: list[dict[str, Any]], reply: dict[str, Any]) -> None:
        for event in events:
            if event.get("type") == ARTIFACT and event.get("kind") == HANDOFF:
                self._handed.add(str(event.get("name")))
        listed = reply.get(HANDOFF_FILES)
        for item in listed if isinstance(listed, list) else ():
            if not isinstance(item, dict):
                continue
            file_id, name = item.get("id"), item.get("name")
            if type(file_id) is not int or not plain_name(name) or name in self._handed:
                continue
            if file_id in self._taken:
                continue
            self._taken.add(file_id)
            threading.Thread(
                target=self.fetch,
                args=(file_id, str(name), str(item.get("sha256", ""))),
                name=f"handoff-{self.attempt.run_id}-{file_id}",
                daemon=True,
            ).start()

    def finish(self) -> bool:
        # The run has ended: a fetch still under way has no one left to wait for it.
        self._over.set()
        return True

    def fetch(self, file_id: int, name: str, sha256: str) -> None:
        """Bring one file here, retrying while the platform is unreachable; else a note."""
        attempt = self.attempt
        delay, tries = 1.0, 0
        # Or the worker shuts down: the file is fetched again by the next attempt's worker.
        while not (self._over.is_set() or attempt.give_up.is_set()):
            try:
                with _held_folder(attempt.work_dir, attempt.run_dir) as folder:
                    _write_whole(
                        folder,
                        name,
                        lambda write: attempt.client.download_handoff(
                            attempt.run_id, file_id, write
                        ),
                        sha256,
                    )
                log.info("run %s: handoff file %s fetched", attempt.run_id, name)
                return
            except PlatformUnavailable as exc:
                log.warning(
                    "run %s: handoff file %s not fetched yet: %s", attempt.run_id, name, exc
                )
            except Mismatch as exc:
                tries += 1
                if tries >= FETCH_TRIES:
                    self._give_up(name, str(exc))
                    return
            except (PlatformRejected, OSError) as exc:
                self._give_up(name, str(exc))
                return
            self._over.wait(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    def _give_up(self, name: str, why: str) -> None:
        log.warning("run %s: handoff file %s cannot be fetched: %s", self.attempt.run_id, name, why)
        with contextlib.suppress(OSError), _held_folder(
            self.attempt.work_dir, self.attempt.run_dir
        ) as folder:
            note = f"{name}{HANDOFF_FAILED}"
            _write_whole(folder, note, lambda write: write(why.encode("utf-8")), "")


class Mismatch(ValueError):
    """The bytes fetched are not those the file was stored with."""


def plain_name(name: Any) -> bool:
    """A file name of the folder itself: no path, no hidden or special name."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= 255
        and "/" not in name
        and "\0" not in name
        and not name.startswith(".")
    )


@contextlib.contextmanager
def _held_folder(work_dir: str, run_dir: str) -> Any:
    """The run's handoff folder as a descriptor, opened from the worker's own ``runs/``
    folder down without following a symbolic link the run may have put in its place."""
    parts = (os.path.basename(work_dir), os.path.basename(run_dir), HANDOFF_DIR_NAME)
    fd = open_beneath(os.path.dirname(work_dir), parts)
    try:
        yield fd
    finally:
        os.close(fd)


def _write_whole(
    folder: int, name: str, fill: Callable[[Callable[[bytes], Any]], None], sha256: str
) -> None:
    """Write ``name`` in ``folder`` from what ``fill`` writes: aside first, renamed into place
    once whole (and, with ``sha256``, matching it)."""
    aside = f".{name}.part"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(aside, dir_fd=folder)
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=folder)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as handle:

            def write(data: bytes) -> None:
                digest.update(data)
                handle.write(data)

            fill(write)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(aside, dir_fd=folder)
        raise
    if sha256 and digest.hexdigest() != sha256.lower():
        os.unlink(aside, dir_fd=folder)
        raise Mismatch(f"{name}: its bytes do not match SHA-256 {sha256}")
    os.rename(aside, name, src_dir_fd=folder, dst_dir_fd=folder)
