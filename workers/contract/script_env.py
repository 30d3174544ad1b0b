"""The environment variables a run's processes get, by the names users' scripts read too.

The host worker sets the run's identity, the supervisor (``workers.run``) the run
directory, the training runner the spec's values; workers.track and the built-in jobs
read them back. docs/training.md lists them for users.
"""

from __future__ import annotations

# Set by the host worker for every run it executes (not by a run started by hand).
RUN_ID = "NPULAB_RUN_ID"
ATTEMPT = "NPULAB_ATTEMPT"
# Set by the host worker: the CANN error-code tables its environment snapshot found
# (paths, os.pathsep-separated; "" for none), which the run's diagnosis reads
# (workers.diagnosis.cann_tables). Unset in a run by hand: it looks for them itself.
CANN_ERROR_TABLES = "NPULAB_CANN_ERROR_TABLES"
# Set by the supervisor for every process of the run; the host worker's kills check it.
RUN_DIR = "NPULAB_RUN_DIR"
# Set by the training runner from the spec.
CHECKPOINT_DIR = "NPULAB_CHECKPOINT_DIR"
DEVICE_TYPE = "NPULAB_DEVICE_TYPE"
PRECISION = "NPULAB_PRECISION"
MAX_STEPS = "NPULAB_MAX_STEPS"
SEED = "NPULAB_SEED"
KEEP_CHECKPOINTS = "NPULAB_KEEP_CHECKPOINTS"
CHECKPOINT_EVERY_STEPS = "NPULAB_CHECKPOINT_EVERY_STEPS"
CHECKPOINT_EVERY_MINUTES = "NPULAB_CHECKPOINT_EVERY_MINUTES"
# The spec's metric_ranks: "all", or the global ranks whose metrics workers.track logs
# ("0,3"; workers.contract.ranks).
METRIC_RANKS = "NPULAB_METRIC_RANKS"
# The supervisor's settings, which the host worker passes on from its own environment.
HEARTBEAT_S = "NPULAB_HEARTBEAT_S"
KILL_GRACE_S = "NPULAB_KILL_GRACE_S"
# Tells the supervisor's descendants which inherited descriptor holds the run directory's lock.
OWNER_LOCK_FD = "NPULAB_OWNER_LOCK_FD"
# The profiling window run.profile_step() records, as JSON; "null": none.
PROFILE = "NPULAB_PROFILE"
# Set by the training runner for a script's own checkpoint files (the spec's checkpoint_dir),
# and, on resume, the file restored there for the script to load.
CHECKPOINT_FILES = "NPULAB_CHECKPOINT_FILES"
RESUME_CHECKPOINT = "NPULAB_RESUME_CHECKPOINT"
# Set by the host worker for an attempt that resumes: the step of the checkpoint the
# platform names (every shard of it stored), where a sharded checkpoint's ranks all resume.
RESUME_STEP = "NPULAB_RESUME_STEP"
# The run's framework, and a MindSpore run's settings (workers.training.ms_settings).
FRAMEWORK = "NPULAB_FRAMEWORK"
MS_MODE = "NPULAB_MS_MODE"
MS_DEVICE_TARGET = "NPULAB_MS_DEVICE_TARGET"
MS_AMP_LEVEL = "NPULAB_MS_AMP_LEVEL"
MS_LOSS_SCALE_MANAGER = "NPULAB_MS_LOSS_SCALE_MANAGER"
# Set by the host worker for a run whose kind declares the handoff capability: the folder
# where the files its other hosts handed over arrive (workers.host.handoff).
HANDOFF_DIR = "NPULAB_HANDOFF_DIR"
# Set by the parity runner for each side's process (docs/parity.md).
PARITY_SIDE = "NPULAB_PARITY_SIDE"
PARITY_DIR = "NPULAB_PARITY_DIR"
PARITY_DTYPE = "NPULAB_PARITY_DTYPE"
PARITY_AMP_LEVEL = "NPULAB_PARITY_AMP_LEVEL"
PARITY_STEPS = "NPULAB_PARITY_STEPS"
PARITY_LEVEL = "NPULAB_PARITY_LEVEL"
# "tensor" or "statistics": statistics only when a tensor dump would pass max_dump_mb.
PARITY_DUMP_TASK = "NPULAB_PARITY_DUMP_TASK"
PARITY_LAYERS = "NPULAB_PARITY_LAYERS"
