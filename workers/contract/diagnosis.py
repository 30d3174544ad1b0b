"""Names of a failed run's diagnosis that the host and the platform share (docs/diagnosis.md).

The category vocabulary is fixed and documented: a rule, the run list's filter and
the upgrade review all use these names and no others. ``blame`` says who is to fix
it, and drives what happens next (a retry elsewhere, no retry, the host's health).
Standard library only, Python 3.8.
"""

from __future__ import annotations

# Category -> what it means (shown on pages and in docs/diagnosis.md).
CATEGORIES = {
    "oom": "device (NPU) memory ran out",
    "hccl-timeout": "a collective waited too long for a peer rank (HCCL connect or exec timeout)",
    "hccl-init": "the HCCL communicator could not be set up (rank table, ports, listen)",
    "network": "the network between hosts or NPUs failed (link down, socket errors)",
    "op-unsupported": "an operator has no kernel for this device, CANN or shape",
    "dtype-unsupported": "an operator does not support the data type it was given",
    "aicore-exec": "an operator's kernel failed on the device (AI Core, AI CPU, vector core)",
    "memory-access": "a kernel read or wrote device memory out of bounds",
    "graph-compile": "compiling an operator or a graph failed (GE, TBE)",
    "version-mismatch": "driver, firmware, CANN, torch and torch_npu do not fit together",
    "env-missing": "CANN is not installed or its environment (set_env.sh) is not set",
    "device-busy": "the device is held by another process or container",
    "device-unavailable": "the device cannot be opened or is not visible to the run",
    "hardware-fault": "the device or its driver failed (lost heartbeat, ECC, link)",
    "numeric-overflow": "a loss or gradient went NaN/Inf, or the loss scale kept overflowing",
    "rank-mismatch": "the ranks disagree (world size, rank table, shapes of a collective)",
    "resource-exhausted": "host resources ran out (disk, shared memory, file handles)",
    "hang": "the run made no progress for hang_timeout_s",
    "user-code": "the run's own code raised an exception",
    "unknown": "a known Ascend error whose cause the message alone does not tell",
}

USER_CODE, STACK, HOST_HARDWARE, NETWORK, UNKNOWN = (
    "user-code",
    "stack",
    "host-hardware",
    "network",
    "unknown",
)
BLAMES = (USER_CODE, STACK, HOST_HARDWARE, NETWORK, UNKNOWN)
# A failure with these blames says something about the host, not the job: the run is
# retried elsewhere and the failure counts against the host's health.
HOST_BLAMES = (HOST_HARDWARE, NETWORK)

# What the supervisor does once a run is found hung (the spec's ``on_hang``).
ON_HANG_FAIL, ON_HANG_REQUEUE, ON_HANG_KEEP = "fail", "requeue", "keep"
ON_HANG = (ON_HANG_FAIL, ON_HANG_REQUEUE, ON_HANG_KEEP)

# The snapshot's field for the CANN error-code tables it found, in its "ascend" section
# (the run's supervisor gets them as script_env.CANN_ERROR_TABLES).
ERROR_TABLES = "error_tables"

# The spec fields (every kind has them, docs/diagnosis.md).
HANG_TIMEOUT_FIELD = "hang_timeout_s"
ON_HANG_FIELD = "on_hang"
STOP_ON_NAN_FIELD = "stop_on_nan"

# Training-health finding names.
NAN_LOSS = "nan-loss"
LOSS_SCALE_FLOOR = "loss-scale-floor"
LOSS_SPIKE = "loss-spike"
GRAD_NORM_ZERO = "grad-norm-zero"
FINDINGS = (NAN_LOSS, LOSS_SCALE_FLOOR, LOSS_SPIKE, GRAD_NORM_ZERO)

# Where a run's CANN process logs (plogs) go: the run directory, unless the user says.
PROCESS_LOG_ENV = "ASCEND_PROCESS_LOG_PATH"
PROCESS_LOG_DIR = "ascend_log"
# What the host collects on failure, beside the plogs, under the run directory.
COLLECTED_DIR = "diagnosis"
COLLECT_LIMIT_BYTES = 50 * 1024 * 1024
