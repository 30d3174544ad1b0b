"""The environment a run starts with: what the devices and toolkits need, not the worker's.

A run is code someone submitted. It gets the variables named here (exact names, or
prefixes ending in ``*``), the spec's own ``env`` (added by the supervisor), and what
the host worker sets for it (visible devices, run id, checkpoint directory). Everything
else the host worker was started with — its token file, broker and database URLs, a
secret key's path in a systemd unit — stays out. deploy/worker-hosts.md lists the default.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from workers.contract import script_env
from workers.contract.kinds import EXTRA_KINDS_ENV

# What a process needs to find programs and libraries, speak a locale and have a home; the
# CANN / CUDA toolkit variables set_env.sh and the driver installers set; the Python
# environment it runs in; the threading knobs of the numeric libraries.
DEFAULT_ALLOW = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TMPDIR",
    "TERM",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CONDA_*",
    "ASCEND_*",
    "TOOLCHAIN_HOME",
    "HCCL_*",
    "CUDA_HOME",
    "CUDA_PATH",
    "NCCL_*",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "TORCH_HOME",
    "HF_HOME",
    "XDG_CACHE_HOME",
)


# The worker's settings that are the runner's too (none of them a secret): the site's own
# kinds, and the supervisor's heartbeat and kill grace. No other NPULAB_ variable passes.
RUNNER_SETTINGS = (EXTRA_KINDS_ENV, script_env.HEARTBEAT_S, script_env.KILL_GRACE_S)


def parse_allow(value: str) -> list[str]:
    """``NAME,PREFIX_*,...`` as a list; empty entries dropped."""
    return [item.strip() for item in value.split(",") if item.strip()]


def _allowed(name: str, allow: Iterable[str]) -> bool:
    for pattern in allow:
        if pattern.endswith("*"):
            if name.startswith(pattern[:-1]):
                return True
        elif name == pattern:
            return True
    return False


def clean_env(environ: Mapping[str, str], allow: Iterable[str]) -> dict[str, str]:
    """The variables of ``environ`` that ``allow`` names, and no others."""
    patterns = list(allow)
    # The worker's own settings are never a run's, whatever a pattern says.
    return {
        name: value
        for name, value in environ.items()
        if name in RUNNER_SETTINGS or (_allowed(name, patterns) and not name.startswith("NPULAB_"))
    }
