"""The training run: start the entry point on the run's devices and watch it.

One process per device: the entry runs through ``workers.training.launch``,
directly for one device and under ``torch.distributed.run`` for several.
The processes get a process group of their own (registered in the run
directory, so whoever stops the run stops them too) and the run's settings in
their environment, where ``workers.track`` finds them. An unmodified script
works as it is: its output becomes the run's log and its exit code decides.

A process that dies of a Python exception before its first step (no metric,
step, heartbeat or checkpoint from ``workers.track``) failed through the job
(a missing script, an import error, bad arguments): cause ``job_error``, which
is never restarted, with the exception's line as the reason. The runner
relays the processes' stderr to its own and keeps its tail to find it.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any

from workers.contract import exits, frameworks, gang, ranks, script_env
from workers.contract.events import CHECKPOINT, EVENTS_FILE, METRIC, STEP
from workers.kinds.base import Outcome, RunContext
from workers.kinds.training import HEARTBEAT_TIMEOUT
from workers.processes import (
    dying_with_this_process,
    kill_group,
    owner_lock_fds,
    register_group,
)
from workers.tracebacks import exception_line
from workers.track import HEARTBEAT_PREFIX, SUMMARY_FILE
from workers.training import msrun
from workers.training.checkpoint_files import CheckpointFiles, restore
from workers.training.graph_dumps import ARCHIVE as GRAPHS_ARCHIVE
from workers.training.graph_dumps import GraphDumps
from workers.training.mindspore_logs import graph_compile_error
from workers.training.ms_settings import GRAPHS_DIR
from workers.training.ms_settings import environment as ms_environment
from workers.training.msrun_logs import FailedRank, WorkerLogs

STOP_GRACE_S = 10.0
WATCH_EVERY_S = 1.0
STDOUT_FD, STDERR_FD = 1, 2
# Enough for the traceback of a failed rank under torchrun's own error report.
STDERR_TAIL_BYTES = 64 * 1024
STDERR_DRAIN_S = 5.0
# Events that show the training did work: after one, a crash is no job error.
PROGRESS_EVENTS = (METRIC, STEP, CHECKPOINT)


def run(ctx: RunContext) -> Outcome:
    spec = ctx.spec
    for stale in glob.glob(os.path.join(ctx.run_dir, HEARTBEAT_PREFIX + "*")):
        os.unlink(stale)  # from an earlier execution in this directory
    workdir = os.path.join(ctx.run_dir, spec["workdir"]) if spec["workdir"] else ctx.run_dir
    if not os.path.isdir(workdir):
        return Outcome(exits.FAILED, f"workdir {workdir} does not exist", cause=exits.JOB_ERROR)
    mindspore = spec["framework"] == frameworks.MINDSPORE
    nodes = int(os.environ.get(gang.NNODES, "1"))
    with_msrun = mindspore and (nodes > 1 or spec["devices"] > 1)
    launch = _msrun_launch(ctx, nodes) if with_msrun else _torch_launch(spec, nodes)
    where = f" × {nodes} hosts (node rank {os.environ[gang.NODE_RANK]})" if nodes > 1 else ""
    ctx.say(
        f"training: {spec['entry']} ({spec['framework']}) on {spec['devices']} "
        f"{spec['device_type']} device(s){where}"
    )
    env = _environment(ctx)
    if with_msrun:
        # msrun starts its workers with the "python" it finds on PATH: this one's.
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    files = _checkpoint_files(ctx, workdir, env)
    graphs = (
        GraphDumps(os.path.join(ctx.run_dir, GRAPHS_DIR), spec["save_graphs_max_mb"] << 20)
        if mindspore and spec["save_graphs"]
        else None
    )
    process = subprocess.Popen(
        [sys.executable, *launch],
        cwd=workdir,
        env=env,
        stderr=subprocess.PIPE,
        start_new_session=True,
        # Its own group, to be stopped as one; it still goes when the runner does.
        pass_fds=owner_lock_fds(),
        preexec_fn=dying_with_this_process(),
    )
    register_group(ctx.run_dir, process.pid)
    stderr = StderrRelay(process.stderr)
    workers = (
        WorkerLogs(os.path.join(ctx.run_dir, msrun.LOG_DIR), _write_line) if with_msrun else None
    )
    if workers is not None:
        workers.start()
    stopping = []

    def stop(signum: int, frame: Any) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, stop)
    watch = _watch(ctx, process, stopping, files, graphs)
    if stopping or watch.hung:
        _stop(process)
    stderr.join()
    if workers is not None:
        workers.stop()
    code = process.returncode
    if files is not None:
        files.poll(final=True)
    summary = dict(_summary(ctx.run_dir), exit_code=code)
    if graphs is not None:
        summary.update(_archive_graphs(ctx, graphs))
    if watch.hung:
        reason = f"no heartbeat from the training loop for {spec['heartbeat_timeout_s']} s"
        return Outcome(exits.FAILED, reason, summary, cause=HEARTBEAT_TIMEOUT)
    if code == 0:
        return Outcome(exits.SUCCEEDED, "training finished", summary)
    if code is not None and code < 0:
        reason = f"the training process was killed by {signal.Signals(-code).name}"
        return Outcome(exits.FAILED, reason, summary, cause=exits.PROCESS_EXIT)
    # Under msrun the rank that failed says why in its own log, not in msrun's stderr.
    failed = workers.failed(stderr.lines()) if workers is not None else None
    lines = failed.lines if failed is not None else stderr.lines()
    error = (mindspore and graph_compile_error(lines)) or exception_line(lines)
    if error and not stopping and not watch.beat and not _trained(ctx.run_dir):
        return Outcome(exits.FAILED, _of_rank(failed) + error, summary, cause=exits.JOB_ERROR)
    if not error and failed is not None and failed.exit_code is not None:
        error = _exit_words(failed.exit_code)
    reason = f"the training process exited with code {code}" + (
        f": {_of_rank(failed)}{error}" if error else ""
    )
    return Outcome(exits.FAILED, reason, summary, cause=exits.PROCESS_EXIT)


def _of_rank(failed: FailedRank | None) -> str:
    return f"rank {failed.rank}: " if failed is not None else ""


def _exit_words(code: int) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


def _msrun_launch(ctx: RunContext, nodes: int) -> list[str]:
    """MindSpore's own launcher, on this host alone or on its share of a run across hosts
    (the host worker set the rendezvous and the node rank: workers.contract.gang)."""
    devices = ctx.spec["devices"]
    master = os.environ.get(gang.MASTER_ADDR, msrun.LOCALHOST)
    port = int(os.environ.get(gang.MASTER_PORT) or msrun.free_port())
    node_rank = int(os.environ.get(gang.NODE_RANK, "0"))
    ctx.say(
        f"msrun: {nodes * devices} workers, {devices} here (node rank {node_rank}), scheduler "
        f"at {master}:{port}; each worker's log in {msrun.LOG_DIR}/ and here, its lines "
        "prefixed with its rank"
    )
    return msrun.msrun_command(
        msrun.across_hosts(master, nodes, devices),
        node_rank,
        [ctx.spec["entry"], *ctx.spec["args"]],
        ctx.run_dir,
        master_port=port,
        rank_table_file=os.environ.get(gang.RANK_TABLE_FILE, ""),
    )[1:]


def _torch_launch(spec: dict[str, Any], nodes: int) -> list[str]:
    """The entry on one device, or under torch.distributed.run on several or across hosts."""
    launch = ["-m", "workers.training.launch", spec["entry"], *spec["args"]]
    if nodes > 1:
        # One host of a run across hosts: the host worker set the rendezvous and this
        # host's node rank (workers.contract.gang).
        return [
            "-m",
            "torch.distributed.run",
            f"--nnodes={nodes}",
            f"--node-rank={os.environ[gang.NODE_RANK]}",
            f"--master-addr={os.environ[gang.MASTER_ADDR]}",
            f"--master-port={os.environ[gang.MASTER_PORT]}",
            f"--nproc-per-node={spec['devices']}",
            *launch,
        ]
    if spec["devices"] > 1:
        return [
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nnodes=1",
            f"--nproc-per-node={spec['devices']}",
            *launch,
        ]
    return launch


class StderrRelay:
    """Copies a pipe to this process's stderr as it comes, keeping its last bytes.

    Chunks, not lines: a progress bar's carriage returns pass at once.
    """

    def __init__(self, pipe: IO[bytes] | None) -> None:
        assert pipe is not None
        self._pipe = pipe
        self._tail = bytearray()
        self._thread = threading.Thread(target=self._relay, name="stderr-relay", daemon=True)
        self._thread.start()

    def _relay(self) -> None:
        fd = self._pipe.fileno()
        relaying = True
        for chunk in iter(lambda: os.read(fd, 65536), b""):
            if relaying:
                try:
                    _write_all(STDERR_FD, chunk)
                except OSError:
                    relaying = False  # the supervisor is gone; keep draining the pipe
            self._tail += chunk
            del self._tail[:-STDERR_TAIL_BYTES]
        self._pipe.close()

    def join(self) -> None:
        # A process the training left behind may hold the pipe open for ever.
        self._thread.join(timeout=STDERR_DRAIN_S)

    def lines(self) -> list[str]:
        return bytes(self._tail).decode("utf-8", errors="replace").splitlines()


def _write_line(line: bytes) -> None:
    # One write a line: msrun's own lines share the pipe and must not cut into it.
    with contextlib.suppress(OSError):  # the supervisor is gone
        _write_all(STDOUT_FD, line)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _environment(ctx: RunContext) -> dict[str, str]:
    spec = ctx.spec
    env = dict(os.environ)
    env.update(
        {
            script_env.RUN_DIR: ctx.run_dir,
            script_env.CHECKPOINT_DIR: env.get(script_env.CHECKPOINT_DIR)
            or os.path.join(ctx.run_dir, "checkpoints"),
            script_env.DEVICE_TYPE: spec["device_type"],
            script_env.PRECISION: spec["precision"],
            script_env.MAX_STEPS: str(spec["max_steps"]),
            script_env.SEED: str(spec["seed"]),
            script_env.KEEP_CHECKPOINTS: str(spec["keep_checkpoints"]),
            script_env.CHECKPOINT_EVERY_STEPS: str(spec["checkpoint_every_steps"]),
            script_env.CHECKPOINT_EVERY_MINUTES: str(spec["checkpoint_every_minutes"]),
            script_env.METRIC_RANKS: ranks.to_env(spec[ranks.METRIC_RANKS]),
            # The profiling window workers.track's run.profile_step() records; "null": none.
            script_env.PROFILE: json.dumps(spec.get("profile")),
            script_env.FRAMEWORK: spec["framework"],
        }
    )
    if spec["framework"] == frameworks.MINDSPORE:
        env.update(ms_environment(spec, ctx.run_dir))
    return env


def _checkpoint_files(ctx: RunContext, workdir: str, env: dict[str, str]) -> CheckpointFiles | None:
    """Watch the spec's checkpoint_dir; on resume, put the newest verified file back there."""
    spec = ctx.spec
    if not spec["checkpoint_dir"]:
        return None
    directory = os.path.join(workdir, spec["checkpoint_dir"])
    os.makedirs(directory, exist_ok=True)
    store_dir = env[script_env.CHECKPOINT_DIR]
    env[script_env.CHECKPOINT_FILES] = directory
    files = CheckpointFiles(
        directory,
        store_dir,
        spec["keep_checkpoints"],
        announce=lambda info: ctx.events.emit(CHECKPOINT, **info.as_event()),
        warn=ctx.say,
        hold_unsettled=bool(env.get(script_env.RUN_ID)),
    )
    suffix = ".ckpt" if spec["framework"] == frameworks.MINDSPORE else ".pt"
    restored = restore(store_dir, directory, suffix, warn=ctx.say)
    if restored:
        env[script_env.RESUME_CHECKPOINT] = restored
        files.skip_existing(os.path.basename(restored))
        ctx.say(f"resuming from {restored} ({script_env.RESUME_CHECKPOINT})")
    # Files already there when it starts (an earlier attempt's) are no new checkpoints.
    for name in os.listdir(directory):
        files.skip_existing(name)
    return files


def _archive_graphs(ctx: RunContext, graphs: GraphDumps) -> dict[str, Any]:
    target = os.path.join(ctx.run_dir, GRAPHS_ARCHIVE)
    summary = graphs.archive(target)
    if summary is None:
        ctx.say("save_graphs: no IR files were written")
        return {"graph_files": 0}
    ctx.say(graphs.notice(summary))
    ctx.events.artifact(GRAPHS_ARCHIVE, target)
    # Packed: the host's disk need not hold them twice.
    shutil.rmtree(graphs.directory, ignore_errors=True)
    return summary


class Watch:
    """What watching the training saw: a heartbeat at all, and whether it stopped."""

    def __init__(self) -> None:
        self.beat = False
        self.hung = False


def _watch(
    ctx: RunContext,
    process: subprocess.Popen,
    stopping: list[int],
    files: CheckpointFiles | None = None,
    graphs: GraphDumps | None = None,
) -> Watch:
    """Wait for the training, or until its heartbeat stops.

    The watchdog starts with the first heartbeat: a script that does not use
    workers.track never beats, and only its own exit or the run's timeout
    ends it. Every rank beats; the oldest heartbeat counts, since one hung
    rank hangs a collective for all.
    """
    watch = Watch()
    timeout = ctx.spec["heartbeat_timeout_s"]
    pattern = os.path.join(ctx.run_dir, HEARTBEAT_PREFIX + "*")
    while process.poll() is None and not stopping:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=WATCH_EVERY_S)
        if files is not None:
            files.poll()
        if graphs is not None:
            graphs.trim()
        beats = [_mtime(path) for path in glob.glob(pattern)]
        beats = [beat for beat in beats if beat is not None]
        watch.beat = watch.beat or bool(beats)
        if timeout and beats and time.time() - min(beats) > timeout:
            ctx.say(f"no heartbeat for {timeout} s: stopping the training processes")
            watch.hung = True
            break
    # A rank that crashed without its exit handler leaves its heartbeat file.
    watch.beat = watch.beat or bool(glob.glob(pattern))
    return watch


def _trained(run_dir: str) -> bool:
    """Whether this attempt's training logged a step's metrics or wrote a checkpoint."""
    try:
        with open(os.path.join(run_dir, EVENTS_FILE), encoding="utf-8", errors="replace") as events:
            for line in events:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and event.get("type") in PROGRESS_EVENTS:
                    return True
    except OSError:
        pass
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
