"""``python -m workers.training.launch ENTRY [ARGS...]``: run one training entry point.

The training runner starts this once per device (through torch.distributed.run
when a run has several). It says which rank runs on which device, then runs
the entry: a script as ``__main__`` (as ``python script.py`` would),
``package.module:function``, or a built-in job.
"""

from __future__ import annotations

import importlib
import os
import runpy
import sys

from workers.contract import script_env
from workers.contract.entries import BUILTIN_PREFIX
from workers.contract.frameworks import MINDSPORE
from workers.processes import tie_rank_to_launcher

# Set by torch.distributed.run for each rank it starts (msrun: MS_WORKER_NUM).
_LAUNCHED_RANK = ("TORCHELASTIC_RUN_ID", "MS_WORKER_NUM")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m workers.training.launch ENTRY [ARGS...]", file=sys.stderr)
        return 2
    entry, args = argv[0], argv[1:]
    run_dir = os.environ.get(script_env.RUN_DIR)
    if run_dir and any(name in os.environ for name in _LAUNCHED_RANK):
        tie_rank_to_launcher(run_dir)
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
