"""A run's profiling window: the backend's profiler over a few steps of a loop, its traces
announced as ``artifact`` events of kind ``trace`` (docs/profiles.md).

The spec's ``profile`` (workers.contract.spec.clean_profile) is torch.profiler's schedule:
``wait`` steps, ``warmup`` steps, ``active`` recorded steps, ``repeat`` times. Each recorded
cycle leaves one trace: a Kineto/Chrome trace JSON on cpu and cuda, stored gzipped as
``trace-<n>.json.gz``; a torch_npu ``*_ascend_pt`` folder on an NPU, stored as
``<folder>.tar.gz``. Both go to ``<run dir>/profiles/``, where the host worker uploads them
from. In a multi-process run each rank records its own window: another rank than 0 keeps its
profiler's output apart (``profiles/raw-rank<N>``) and names its traces for itself
(``rank3-trace-1.json.gz``, workers.contract.ranks). Standard library plus torch (through
the backend), Python 3.8.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tarfile
from typing import Any

from workers.contract.events import TRACE
from workers.contract.ranks import rank_file
from workers.contract.spec import profiled_steps
from workers.events import EventWriter

PROFILES_DIR = "profiles"
# The profiler's own output, before it is compressed into PROFILES_DIR.
RAW_DIR = os.path.join(PROFILES_DIR, "raw")
ASCEND_SUFFIX = "_ascend_pt"


class Window:
    """The profiler over one loop: ``step()`` after each of its steps, ``close()`` at its end.

    With no profile it does nothing, so a loop calls it unconditionally. The window closes
    itself once every cycle is recorded; ``close`` is for a loop that ends first (what was
    recorded by then is kept).
    """

    def __init__(
        self,
        backend: Any,
        profile: dict[str, Any] | None,
        run_dir: str,
        events: EventWriter,
        say: Any = None,
        rank: int = 0,
    ) -> None:
        self.profile = profile
        self.rank = rank
        self.run_dir = os.path.abspath(run_dir)
        self.events = events
        self.say = say or (lambda line: None)
        self.steps = 0
        self.traces: list[dict[str, Any]] = []
        self._profiler: Any = None
        # Each rank's own: a window that closes removes its raw folder, never another's.
        self._raw_dir = os.path.join(self.run_dir, RAW_DIR + (f"-rank{rank}" if rank else ""))
        self._published: set = set()
        if profile is None:
            return
        os.makedirs(self._raw_dir, exist_ok=True)
        self._total = profiled_steps(profile)
        self._profiler = backend.profiler(profile, self._raw_dir, self._publish)
        self._profiler.start()
        self.say(
            f"profiling: wait {profile['wait']}, warmup {profile['warmup']}, "
            f"active {profile['active']} step(s), {profile['repeat']} time(s) "
            f"({backend.name} profiler)"
        )

    @property
    def active(self) -> bool:
        return self._profiler is not None

    def step(self) -> None:
        if self._profiler is None:
            return
        self._profiler.step()
        self.steps += 1
        if self.steps >= self._total:
            self.close()

    def close(self) -> None:
        """Stop the profiler (a cycle in progress is saved) and announce what it recorded."""
        profiler, self._profiler = self._profiler, None
        if profiler is None:
            return
        try:
            profiler.stop()
        finally:
            self._publish()
            shutil.rmtree(self._raw_dir, ignore_errors=True)
        if not self.traces:
            self.say(
                f"profiling: the loop ended after {self.steps} step(s), before an active one: "
                "no trace"
            )

    def __enter__(self) -> Window:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _publish(self) -> None:
        """Compress each new output of the profiler into PROFILES_DIR and announce it."""
        if not os.path.isdir(self._raw_dir):
            return
        for entry in sorted(os.listdir(self._raw_dir)):
            source = os.path.join(self._raw_dir, entry)
            if entry in self._published:
                continue
            if entry.endswith(".json") and os.path.isfile(source):
                name = rank_file(entry + ".gz", self.rank)
                target = os.path.join(self.run_dir, PROFILES_DIR, name)
                gzip_file(source, target)
            elif entry.endswith(ASCEND_SUFFIX) and os.path.isdir(source):
                name = rank_file(entry + ".tar.gz", self.rank)
                target = os.path.join(self.run_dir, PROFILES_DIR, name)
                tar_folder(source, target)
            else:
                continue
            self._published.add(entry)
            if os.path.isdir(source):
                shutil.rmtree(source, ignore_errors=True)
            else:
                os.remove(source)
            event = self.events.artifact(name, target, kind=TRACE)
            self.events.flush()
            self.traces.append(event)
            self.say(f"profiling: trace {name} ({event['bytes']} bytes compressed)")


def gzip_file(source: str, target: str) -> None:
    """``source`` gzipped into ``target``, streaming; ``target`` appears only when complete."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    partial = target + ".partial"
    # mtime 0: the same trace compresses to the same bytes (and SHA-256).
    with open(source, "rb") as raw, open(partial, "wb") as out, gzip.GzipFile(
        fileobj=out, mode="wb", mtime=0
    ) as packed:
        shutil.copyfileobj(raw, packed, 1 << 20)
    os.replace(partial, target)


def tar_folder(source: str, target: str) -> None:
    """The folder ``source`` as ``target`` (.tar.gz, one top folder); links are left out."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    partial = target + ".partial"
    top = os.path.basename(source.rstrip(os.sep))

    def no_links(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        # The platform refuses links in a trace archive; a profiler writes none.
        return None if info.issym() or info.islnk() else info

    with tarfile.open(partial, "w:gz") as archive:
        archive.add(source, arcname=top, filter=no_links)
    os.replace(partial, target)
