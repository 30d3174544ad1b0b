"""The training kind: train a model on the devices, checkpoint it, resume it after a crash."""

from __future__ import annotations

from workers.contract import frameworks
from workers.contract.capabilities import CHECKPOINTS, PROFILING
from workers.contract.entries import check_entry
from workers.contract.exits import Cause
from workers.contract.kinds import Kind
from workers.contract.spec import (
    Field,
    common_fields,
    host_path_problem,
    hosts_field,
    metric_ranks_field,
)

PRECISIONS = ("fp32", "fp16", "bf16")


def _check_entry(entry: str) -> str | None:
    # A script on the host is named by its absolute path (docs/training.md) or
    # from the workdir, which it may not climb out of.
    if entry.endswith(".py") and ".." in entry.replace("\\", "/").split("/"):
        return "must not contain '..': an absolute path, or a path inside the workdir"
    return check_entry(entry)


FIELDS = [
    *common_fields(default_timeout_s=7 * 24 * 3600, default_hang_timeout_s=1800),
    hosts_field(),
    metric_ranks_field(),
    Field(
        "entry",
        "string",
        check=_check_entry,
        host_input=True,
        help="path/to/script.py, package.module:function, or builtin:cnn / builtin:lm.",
    ),
    Field("args", "strings", default=[], help="Arguments for the entry point."),
    Field(
        "workdir",
        "string",
        default="",
        check=host_path_problem,
        host_input=True,
        help="Where it runs: an absolute directory on the host, or one inside the run "
        "directory; empty: the run directory.",
    ),
    Field(
        "framework",
        "string",
        default=frameworks.PYTORCH,
        choices=frameworks.FRAMEWORKS,
        help="pytorch, or mindspore (on a host whose worker has a MindSpore interpreter).",
    ),
    Field(
        "mode",
        "string",
        default=frameworks.PYNATIVE,
        choices=frameworks.MODES,
        help="MindSpore's execution mode: pynative or graph (compiled).",
    ),
    Field(
        "amp_level",
        "string",
        default="O0",
        choices=frameworks.AMP_LEVELS,
        help="MindSpore's mixed precision level for a Model that does not set its own.",
    ),
    Field(
        "loss_scale_manager",
        "string",
        default="auto",
        choices=frameworks.LOSS_SCALE_MANAGERS,
        help="MindSpore's loss scale manager for a Model that does not set its own; "
        "auto: the amp_level's default.",
    ),
    Field(
        "save_graphs",
        "integer",
        default=0,
        minimum=0,
        maximum=frameworks.MAX_SAVE_GRAPHS,
        help="MindSpore graph IR dump level (MS_DEV_SAVE_GRAPHS); 0: off. The dumps become "
        "an artifact of the run, bounded in size.",
    ),
    Field(
        "save_graphs_max_mb",
        "integer",
        default=64,
        minimum=1,
        maximum=64 * 1024,
        help="The most megabytes of graph IR dumps kept on the host and in the artifact; "
        "files beyond it are deleted as they come, with a notice.",
    ),
    Field(
        "checkpoint_dir",
        "string",
        default="",
        check=host_path_problem,
        help="A directory (absolute, or inside the workdir) where the script writes its own "
        "checkpoint files (MindSpore .ckpt, PyTorch .pt / .safetensors); given to it as "
        "NPULAB_CHECKPOINT_FILES. Empty: none.",
    ),
    Field("precision", "string", default="fp32", choices=PRECISIONS),
    Field(
        "max_steps",
        "integer",
        default=0,
        minimum=0,
        maximum=10**9,
        help="Steps to train; 0: the entry point decides (300 for builtin jobs).",
    ),
    Field(
        "checkpoint_every_steps",
        "integer",
        default=100,
        minimum=0,
        maximum=10**9,
        help="Checkpoint every N steps; 0: not by steps.",
    ),
    Field(
        "checkpoint_every_minutes",
        "number",
        default=30.0,
        minimum=0,
        maximum=7 * 24 * 60,
        help="Checkpoint at least this often; 0: not by time.",
    ),
    Field("keep_checkpoints", "integer", default=3, minimum=1, maximum=1000),
    Field(
        "max_restarts",
        "integer",
        default=3,
        minimum=0,
        maximum=100,
        help="New attempts after a crash or a lost host, each resuming from a checkpoint.",
    ),
    Field(
        "heartbeat_timeout_s",
        "integer",
        default=600,
        minimum=0,
        maximum=7 * 24 * 3600,
        help="Kill a run whose training loop stopped beating (needs workers.track); 0: never.",
    ),
    Field("seed", "integer", default=0, minimum=0, maximum=2**31 - 1),
]


# The training runner's watchdog: the loop stopped touching its heartbeat
# file. A hung collective far more often than a bug, so it is restarted.
HEARTBEAT_TIMEOUT = "heartbeat_timeout"
KIND = Kind(
    "training",
    "Training: train a model on the devices, checkpoint it, resume it after a crash.",
    "workers.kinds.training.runner",
    FIELDS,
    check=frameworks.check_fields,
    host_labels=frameworks.required_labels,
    causes=(Cause(HEARTBEAT_TIMEOUT, "Heartbeat stopped", infrastructure=True, restartable=True),),
    capabilities=(CHECKPOINTS, PROFILING),
)
