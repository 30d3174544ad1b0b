"""The environment variables that decide how an accelerator stack behaves, secrets redacted."""

from __future__ import annotations

import os
from typing import Mapping

from workers.contract.redact import redact_env

PREFIXES = ("ASCEND_", "HCCL_", "CUDA_", "NCCL_", "TORCH_NPU_", "NPU_", "ACL_", "ATB_", "MINDIE_")
NAMES = (
    "RANK_TABLE_FILE",
    "PYTORCH_NPU_ALLOC_CONF",
    "PYTORCH_CUDA_ALLOC_CONF",
    "TASK_QUEUE_ENABLE",
    "CPU_AFFINITY_CONF",
    "TORCH_DEVICE_BACKEND_AUTOLOAD",
    "COMBINED_ENABLE",
    "OMP_NUM_THREADS",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PATH",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "TOOLCHAIN_HOME",
    "OPTION_EXEC_EXTERN_PLUGIN_PATH",
)


def collect_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The relevant variables of ``environ`` (default: this process's), sorted by name."""
    environ = os.environ if environ is None else environ
    chosen = {
        key: value for key, value in environ.items() if key in NAMES or key.startswith(PREFIXES)
    }
    return dict(sorted(redact_env(chosen).items()))
