"""npulab's tracking library, for the training scripts themselves.

    from workers import track

    run = track.init()
    start = 0
    checkpoint = run.resume()
    if checkpoint:
        checkpoint.restore(model=model, optimizer=optimizer, scheduler=scheduler)
        start = checkpoint.step + 1
    for step in range(start, steps):
        ...
        run.log(step, loss=loss.item(), lr=scheduler.get_last_lr()[0])
        if run.checkpoint_due(step):
            run.save_checkpoint(step, model=model, optimizer=optimizer, scheduler=scheduler)

Logging never waits on the network: it appends to the run's events.jsonl and
the host worker forwards it. Outside npulab (no NPULAB_RUN_DIR) it writes to
./npulab-run. In a multi-process job every rank calls it: metrics come from rank 0 and
the ranks the spec's ``metric_ranks`` names (each other rank's under keys of its own,
``loss@rank3``), checkpoints from rank 0, heartbeats from every rank;
``run.profile_step()`` once a step records the spec's profiling window (every rank
its own traces; docs/profiles.md). Standard library plus torch; Python 3.8.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import threading
import time
from typing import Any

from workers.contract import ranks, script_env
from workers.contract.capabilities import CHECKPOINT_DAMAGED, RESUME
from workers.contract.events import CHECKPOINT, EVENTS_FILE
from workers.events import EventWriter
from workers.track import checkpoint as checkpoints
from workers.track import rng

HEARTBEAT_PREFIX = "heartbeat."
SUMMARY_FILE = "summary.json"
# Heartbeat files are touched at most this often: the watchdog counts minutes.
HEARTBEAT_EVERY_S = 1.0
EVENTS_BUFFER_S = 0.1

_run: Run | None = None
_init_lock = threading.Lock()


def init() -> Run:
    """This process's run, from the environment the runner set (created on first call)."""
    global _run
    with _init_lock:
        if _run is None:
            _run = Run.from_environment(os.environ)
        return _run


class Checkpoint:
    """A verified checkpoint, loaded to the CPU."""

    def __init__(self, info: checkpoints.CheckpointInfo, state: dict[str, Any]) -> None:
        self.info = info
        self.state = state

    @property
    def step(self) -> int:
        return int(self.state["step"])

    @property
    def data_position(self) -> Any:
        return self.state.get("data_position")

    @property
    def extra(self) -> dict[str, Any]:
        return self.state.get("extra") or {}

    def restore(
        self,
        model: Any = None,
        optimizer: Any = None,
        scheduler: Any = None,
        scaler: Any = None,
        restore_rng: bool = True,
    ) -> None:
        """Load the saved states into these objects (already on their device) and the RNGs."""
        for name, target in (
            ("model", _unwrap(model)),
            ("optimizer", optimizer),
            ("scheduler", scheduler),
            ("scaler", scaler),
        ):
            if target is not None:
                if self.state.get(name) is None:
                    raise KeyError(f"the checkpoint of step {self.step} holds no {name} state")
                target.load_state_dict(self.state[name])
        if restore_rng and self.state.get("rng"):
            import torch

            rng.restore(self.state["rng"], torch)


class Run:
    """One process's handle on its run: metrics, heartbeats, checkpoints."""

    def __init__(
        self,
        run_dir: str,
        checkpoint_dir: str,
        rank: int = 0,
        world_size: int = 1,
        run_id: str = "",
        attempt: int = 1,
        keep_checkpoints: int = 3,
        every_steps: int = 0,
        every_minutes: float = 0.0,
        metric_ranks: ranks.Ranks = "",
    ) -> None:
        os.makedirs(run_dir, exist_ok=True)
        self.run_dir = run_dir
        self.checkpoint_dir = checkpoint_dir
        self.rank = rank
        self.world_size = world_size
        self.run_id = run_id
        self.attempt = attempt
        self.keep_checkpoints = keep_checkpoints
        self.every_steps = every_steps
        self.every_minutes = every_minutes
        self.logs_metrics = ranks.includes(metric_ranks or ranks.DEFAULT_METRIC_RANKS, rank)
        self.events = EventWriter(os.path.join(run_dir, EVENTS_FILE), buffer_s=EVENTS_BUFFER_S)
        self._heartbeat_file = os.path.join(run_dir, f"{HEARTBEAT_PREFIX}{rank}")
        self._last_beat = 0.0
        self._last_checkpoint = time.monotonic()
        self._profile_window: Any = None
        threading.Thread(target=self._flush_forever, name="track-flush", daemon=True).start()
        atexit.register(self._exiting)

    @classmethod
    def from_environment(cls, env: Any) -> Run:
        run_dir = os.path.abspath(env.get(script_env.RUN_DIR) or "npulab-run")
        return cls(
            run_dir=run_dir,
            checkpoint_dir=env.get(script_env.CHECKPOINT_DIR)
            or os.path.join(run_dir, "checkpoints"),
            rank=int(env.get("RANK", "0")),
            world_size=int(env.get("WORLD_SIZE", "1")),
            run_id=env.get(script_env.RUN_ID, ""),
            attempt=int(env.get(script_env.ATTEMPT, "1")),
            keep_checkpoints=int(env.get(script_env.KEEP_CHECKPOINTS, "3")),
            every_steps=int(env.get(script_env.CHECKPOINT_EVERY_STEPS, "0")),
            every_minutes=float(env.get(script_env.CHECKPOINT_EVERY_MINUTES, "0")),
            metric_ranks=ranks.from_env(env.get(script_env.METRIC_RANKS)),
        )

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def log(self, step: int, **metrics: float) -> None:
        """Record metrics of ``step`` and show that training is alive.

        Rank 0's are the run's series; another rank's are kept only when the spec's
        ``metric_ranks`` names it, each key as that rank's (``loss@rank3``).
        """
        self.heartbeat()
        if self.is_main:
            self.events.metrics(step, metrics)
        elif self.logs_metrics:
            ranked = {ranks.rank_key(key, self.rank): value for key, value in metrics.items()}
            self.events.metrics(step, ranked)

    def heartbeat(self) -> None:
        """Show the watchdog that the training loop moves; ``log`` does it too."""
        now = time.monotonic()
        if now - self._last_beat >= HEARTBEAT_EVERY_S:
            self._last_beat = now
            with open(self._heartbeat_file, "a"):
                os.utime(self._heartbeat_file)

    def profile_step(self) -> None:
        """Mark the end of a training step for the run's profiling window (spec ``profile``).

        Call it once a step, after ``log``; it does nothing unless the run asked for a
        profile, and on a rank the profile's ``ranks`` leaves out. The profiler starts at
        the first call and stops once its window is recorded; each rank's traces are
        announced in the run's events, another rank's named for it (``rank3-…``).
        """
        if self._profile_window is None:
            self._profile_window = self._open_profile_window()
        self._profile_window.step()

    def _open_profile_window(self) -> Any:
        from workers.backends import get_backend
        from workers.contract.spec import clean_profile
        from workers.profiling import Window

        profile = clean_profile(json.loads(os.environ.get(script_env.PROFILE) or "null"))
        if profile is not None and not ranks.includes(profile["ranks"], self.rank):
            profile = None
        backend = get_backend(os.environ.get(script_env.DEVICE_TYPE) or "cpu")
        if profile is not None:
            backend.load()
        return Window(backend, profile, self.run_dir, self.events, self.say, rank=self.rank)

    def _exiting(self) -> None:
        if self._profile_window is not None:
            # A loop that ended inside the window still leaves what was recorded.
            self._profile_window.close()
        self.events.flush()
        # A rank that is done no longer beats; it must not look hung to the
        # watchdog while the others finish their last steps.
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._heartbeat_file)

    def say(self, line: str) -> None:
        """A line in the run's log, from rank 0."""
        if self.is_main:
            self.events.log("runner", line)

    def set_summary(self, **values: Any) -> None:
        """Numbers that sum the run up (final loss, throughput): the run's result shows them.

        NaN and the infinities become null: the result event is strict JSON.
        """
        if self.is_main:
            path = os.path.join(self.run_dir, SUMMARY_FILE)
            finite = {key: _finite_or_none(value) for key, value in values.items()}
            with open(path + ".tmp", "w", encoding="utf-8") as handle:
                json.dump(finite, handle, allow_nan=False)
            os.replace(path + ".tmp", path)

    def checkpoint_due(self, step: int) -> bool:
        """True when the run's cadence (every N steps, every M minutes) asks for a checkpoint."""
        if self.every_steps and (step + 1) % self.every_steps == 0:
            return True
        minutes = (time.monotonic() - self._last_checkpoint) / 60
        return bool(self.every_minutes) and minutes >= self.every_minutes

    def save_checkpoint(
        self,
        step: int,
        model: Any = None,
        optimizer: Any = None,
        scheduler: Any = None,
        scaler: Any = None,
        extra: dict[str, Any] | None = None,
        data_position: Any = None,
        sharded: bool = False,
    ) -> checkpoints.CheckpointInfo | None:
        """Write a checkpoint of ``step`` (rank 0; other ranks return None at once).

        ``sharded``: every rank calls it and saves its own state (a model and optimizer
        sharded across the ranks, FSDP's or ZeRO's), rank N's in its own folder; the
        checkpoint is complete, and may be resumed from, once every rank's is stored.
        """
        self._last_checkpoint = time.monotonic()
        if not self.is_main and not sharded:
            return None
        import torch

        state = {
            "format": checkpoints.FORMAT,
            "step": step,
            "run_id": self.run_id,
            "attempt": self.attempt,
            "model": _state(_unwrap(model)),
            "optimizer": _state(optimizer),
            "scheduler": _state(scheduler),
            "scaler": _state(scaler),
            "rng": rng.capture(torch),
            "data_position": data_position,
            "extra": extra or {},
        }
        shards = self.world_size if sharded else 1
        directory = checkpoints.shard_dir(self.checkpoint_dir, self.rank if sharded else 0)
        info = checkpoints.save(directory, step, state, torch, self.keep_checkpoints, shards)
        # A shard says whose it is; a whole checkpoint stays as it always was.
        sharding = {"shards": shards, "rank": self.rank} if sharded else {}
        self.events.emit(CHECKPOINT, **info.as_event(), **sharding)
        return info

    def resume(self) -> Checkpoint | None:
        """The newest checkpoint that verifies, loaded to the CPU, or None.

        A damaged newer checkpoint is skipped with a warning in the log and a
        ``checkpoint_damaged`` event; the resume itself is a ``resume`` event,
        which tells the platform from which step the metrics go on (none, for
        a later attempt that found no checkpoint: it starts over).
        """

        def warn(step: int, why: str) -> None:
            self.say(f"warning: checkpoint of step {step} is damaged ({why}); trying an older one")
            if self.is_main:
                self.events.emit(CHECKPOINT_DAMAGED, step=step, reason=why)

        info = self._resume_point(warn)
        if info is None:
            if self.is_main and self.attempt > 1:
                # A later attempt with nothing to resume from starts over: the
                # platform drops the earlier attempts' points it will log again.
                self.events.emit(RESUME, step=None, path=None)
                self.say(f"attempt {self.attempt}: no checkpoint to resume from; starting over")
                self.events.flush()
            return None
        import torch

        found = Checkpoint(info, checkpoints.load(info, torch))
        if self.is_main:
            self.events.emit(RESUME, step=found.step, path=info.path)
            self.say(f"resuming from the checkpoint of step {found.step}")
        self.events.flush()
        return found

    def _resume_point(self, warn: Any) -> checkpoints.CheckpointInfo | None:
        """This rank's checkpoint to resume from: the newest that verifies, or, when it is
        one shard of a sharded checkpoint, this rank's shard of the step every rank takes.

        That step is the one the platform named (every shard of it stored) when there is
        one; by hand, the newest whose every shard is on this host. A rank whose shard of
        that step is missing or damaged cannot go on with the others: RuntimeError.
        """
        named = os.environ.get(script_env.RESUME_STEP, "")
        found = checkpoints.latest_valid(self.checkpoint_dir, warn)
        if found is None or checkpoints.shard_count(found) == 1:
            return found
        shards = checkpoints.shard_count(found)
        if named.isdigit():
            step = int(named)
        else:
            step = _newest_whole(self.checkpoint_dir, shards)
            if step is None:
                return None
        directory = checkpoints.shard_dir(self.checkpoint_dir, self.rank)
        try:
            return checkpoints.verify(directory, step)
        except ValueError as exc:
            raise RuntimeError(
                f"rank {self.rank} has no usable shard of the checkpoint of step {step} "
                f"in {directory}: {exc}"
            ) from None

    def _flush_forever(self) -> None:
        # Events logged just before a long pause (an evaluation) still leave soon.
        while True:
            time.sleep(EVENTS_BUFFER_S)
            self.events.flush()


def _newest_whole(directory: str, shards: int) -> int | None:
    """The newest step whose every shard (ranks 0 to ``shards`` - 1) verifies here."""
    for step in reversed(checkpoints.complete(directory)):
        try:
            for rank in range(shards):
                checkpoints.verify(checkpoints.shard_dir(directory, rank), step)
        except ValueError:
            continue
        return step
    return None


def _finite_or_none(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _unwrap(model: Any) -> Any:
    """The module inside (Distributed)DataParallel, so checkpoints load with or without it."""
    if type(model).__name__ in ("DistributedDataParallel", "DataParallel"):
        return model.module
    return model


def _state(part: Any) -> Any:
    return part.state_dict() if part is not None else None


__all__ = ["Checkpoint", "Run", "init"]
