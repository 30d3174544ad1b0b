"""``python -m workers.training.launch ENTRY [ARGS...]``: run one training entry point.

The training runner starts this once per device (through torch.distributed.run
when a run has several, or MindSpore's msrun, which runs it by path). Under torchrun
it prefixes every line the rank prints with its rank (workers.training.rank_output), as
the training runner does for msrun's workers. It says which rank runs on which device,
then runs the entry: a script as ``__main__`` (as ``python script.py`` would),
``package.module:function``, or a built-in job.

msrun starts its scheduler with the same command: there this runs MindSpore's
cluster scheduler instead of the entry.
"""

from __future__ import annotations

import importlib
import os
import runpy
import sys
from typing import MutableMapping

from workers.contract import gang, script_env
from workers.contract.entries import BUILTIN_PREFIX
from workers.contract.frameworks import MINDSPORE
from workers.processes import tie_rank_to_launcher
from workers.training.rank_output import mark_output

# msrun's variables in each process it starts: the job's worker count, the process's role
# (the scheduler's is MS_SCHED), a worker's global rank and its local index.
MS_WORKER_NUM, MS_ROLE, MS_SCHEDULER = "MS_WORKER_NUM", "MS_ROLE", "MS_SCHED"
MS_RANK_ID, MS_DEVICE_ID = "RANK_ID", "DEVICE_ID"
# Set by torch.distributed.run for each rank it starts (msrun: MS_WORKER_NUM).
_LAUNCHED_RANK = ("TORCHELASTIC_RUN_ID", MS_WORKER_NUM)
# torchrun's ranks share the runner's output; msrun writes each worker's to a file of its
# own, which the training runner relays with the rank's prefix.
_TORCHRUN_RANK = "TORCHELASTIC_RUN_ID"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m workers.training.launch ENTRY [ARGS...]", file=sys.stderr)
        return 2
    entry, args = argv[0], argv[1:]
    run_dir = os.environ.get(script_env.RUN_DIR)
    if run_dir and any(name in os.environ for name in _LAUNCHED_RANK):
        tie_rank_to_launcher(run_dir)
        if _TORCHRUN_RANK in os.environ:
            # The run's log tells the ranks' lines apart (its rank selector).
            mark_output(int(os.environ.get("RANK", "0")))
    if os.environ.get(MS_ROLE) == MS_SCHEDULER:
        return msrun_scheduler()
    if MS_WORKER_NUM in os.environ:
        adopt_msrun_ranks(os.environ)
    announce()
    if os.environ.get(script_env.FRAMEWORK) == MINDSPORE:
        from workers.training.ms_settings import prepare

        _say(prepare(os.environ))
    if entry.startswith(BUILTIN_PREFIX):
        from workers.training.builtin import main as run_builtin

        return run_builtin(entry[len(BUILTIN_PREFIX) :], args)
    if entry.endswith(".py"):
        script = os.path.abspath(entry)
        sys.argv = [script, *args]
        sys.path.insert(0, os.path.dirname(script))
        runpy.run_path(script, run_name="__main__")
        return 0
    module_name, function_name = entry.split(":", 1)
    sys.argv = [module_name, *args]
    sys.path.insert(0, os.getcwd())
    result = getattr(importlib.import_module(module_name), function_name)()
    return result if isinstance(result, int) else 0


def msrun_scheduler() -> int:
    """Serve as msrun's scheduler until the job's workers are done, never run the entry.

    msrun gives its scheduler the workers' command; a script would run there a third time,
    as rank 0 (RANK_ID 0), training and writing rank 0's metrics and checkpoints. A host
    whose node rank is not 0 serves none: its msrun took the job's master address for one of
    its own (two hosts of a run on one machine), and node rank 0's scheduler is the job's.
    """
    if os.environ.get(gang.NODE_RANK, "0") != "0":
        _say("npulab: msrun scheduler not needed here: node rank 0 hosts the job's")
        return 0
    from mindspore.communication import init

    init()  # as MS_SCHED: serves the cluster until its workers leave
    return 0


def adopt_msrun_ranks(env: MutableMapping[str, str]) -> None:
    """Give a worker msrun started torch's rank variables (RANK, WORLD_SIZE, LOCAL_RANK),
    which workers.track and the announcement read: the host worker set RANK to the host's
    first rank, the same for every worker msrun starts there."""
    env[gang.RANK] = env.get(MS_RANK_ID, env.get(gang.RANK, "0"))
    env[gang.WORLD_SIZE] = env[MS_WORKER_NUM]
    env[gang.LOCAL_RANK] = env.get(MS_DEVICE_ID, "0")


def announce() -> None:
    """One line per process: which rank, which device (users ask for exactly this)."""
    env = os.environ
    device_type = env.get(script_env.DEVICE_TYPE, "cpu")
    local_rank = env.get("LOCAL_RANK", "0")
    visible = ""
    for variable in ("ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        if variable in env:
            visible = f" ({variable}={env[variable]})"
    line = (
        f"npulab: rank {env.get('RANK', '0')} of {env.get('WORLD_SIZE', '1')}, "
        f"local rank {local_rank}, {device_type} device {local_rank}{visible}, pid {os.getpid()}"
    )
    _say(line)


def _say(line: str) -> None:
    # One write: the ranks share the pipe, and unbuffered print() writes the text and its
    # newline apart, so two ranks' lines could run into one.
    os.write(sys.stdout.fileno(), (line + "\n").encode("utf-8", "replace"))


if __name__ == "__main__":
    sys.exit(main())
