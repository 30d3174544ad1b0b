"""The training run: start the entry point on the run's devices and watch it.

One process per device: the entry runs through ``workers.training.launch``,
directly for one device and under ``torch.distributed.run`` for several.
The processes get a process group of their own (registered in the run
directory, so whoever stops the run stops them too) and the run's settings in
their environment, where ``workers.track`` finds them. An unmodified script
works as it is: its output becomes the run's log and its exit code decides.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from workers.contract import exits
from workers.kinds.base import Outcome, RunContext
from workers.kinds.training import HEARTBEAT_TIMEOUT
from workers.processes import kill_group, register_group
from workers.track import HEARTBEAT_PREFIX, SUMMARY_FILE

STOP_GRACE_S = 10.0
WATCH_EVERY_S = 1.0


def run(ctx: RunContext) -> Outcome:
    spec = ctx.spec
    for stale in glob.glob(os.path.join(ctx.run_dir, HEARTBEAT_PREFIX + "*")):
        os.unlink(stale)  # from an earlier execution in this directory
    workdir = os.path.join(ctx.run_dir, spec["workdir"]) if spec["workdir"] else ctx.run_dir
    if not os.path.isdir(workdir):
        return Outcome(exits.FAILED, f"workdir {workdir} does not exist", cause=exits.PROCESS_EXIT)
    launch = ["-m", "workers.training.launch", spec["entry"], *spec["args"]]
    if spec["devices"] > 1:
        launch = [
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nnodes=1",
            f"--nproc-per-node={spec['devices']}",
            *launch,
        ]
    ctx.say(f"training: {spec['entry']} on {spec['devices']} {spec['device_type']} device(s)")
    process = subprocess.Popen(
        [sys.executable, *launch],
        cwd=workdir,
        env=_environment(ctx),
        start_new_session=True,
    )
    register_group(ctx.run_dir, process.pid)
    stopping = []

    def stop(signum: int, frame: Any) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, stop)
    hung = _watch(ctx, process, stopping)
    if stopping or hung:
        _stop(process)
    code = process.returncode
    summary = dict(_summary(ctx.run_dir), exit_code=code)
    if hung:
        reason = f"no heartbeat from the training loop for {spec['heartbeat_timeout_s']} s"
        return Outcome(exits.FAILED, reason, summary, cause=HEARTBEAT_TIMEOUT)
    if code == 0:
        return Outcome(exits.SUCCEEDED, "training finished", summary)
    if code is not None and code < 0:
        reason = f"the training process was killed by {signal.Signals(-code).name}"
    else:
        reason = f"the training process exited with code {code}"
    return Outcome(exits.FAILED, reason, summary, cause=exits.PROCESS_EXIT)


def _environment(ctx: RunContext) -> dict[str, str]:
    spec = ctx.spec
    env = dict(os.environ)
    env.update(
        {
            "NPULAB_RUN_DIR": ctx.run_dir,
            "NPULAB_CHECKPOINT_DIR": env.get("NPULAB_CHECKPOINT_DIR")
            or os.path.join(ctx.run_dir, "checkpoints"),
            "NPULAB_DEVICE_TYPE": spec["device_type"],
            "NPULAB_PRECISION": spec["precision"],
            "NPULAB_MAX_STEPS": str(spec["max_steps"]),
            "NPULAB_SEED": str(spec["seed"]),
            "NPULAB_KEEP_CHECKPOINTS": str(spec["keep_checkpoints"]),
            "NPULAB_CHECKPOINT_EVERY_STEPS": str(spec["checkpoint_every_steps"]),
            "NPULAB_CHECKPOINT_EVERY_MINUTES": str(spec["checkpoint_every_minutes"]),
        }
    )
    return env


def _watch(ctx: RunContext, process: subprocess.Popen, stopping: list[int]) -> bool:
    """Wait for the training; True if its heartbeat stopped.

    The watchdog starts with the first heartbeat: a script that does not use
    workers.track never beats, and only its own exit or the run's timeout
    ends it. Every rank beats; the oldest heartbeat counts, since one hung
    rank hangs a collective for all.
    """
    timeout = ctx.spec["heartbeat_timeout_s"]
    pattern = os.path.join(ctx.run_dir, HEARTBEAT_PREFIX + "*")
    while process.poll() is None and not stopping:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=WATCH_EVERY_S)
        if not timeout:
            continue
        beats = [_mtime(path) for path in glob.glob(pattern)]
        beats = [beat for beat in beats if beat is not None]
        if beats and time.time() - min(beats) > timeout:
            ctx.say(f"no heartbeat for {timeout} s: stopping the training processes")
            return True
    return False


def _stop(process: subprocess.Popen) -> None:
    kill_group(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=STOP_GRACE_S)
    kill_group(process.pid, signal.SIGKILL)
    process.wait()


def _summary(run_dir: str) -> dict[str, Any]:
    try:
        with open(os.path.join(run_dir, SUMMARY_FILE), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _mtime(path: str) -> float | None:
    try:
        return os.path.getmtime(path)
    except OSError:
        return None
