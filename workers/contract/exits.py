"""How a run ended: the supervisor's process exit codes and the exit causes.

A cause is a name both sides store and compare. The core causes are here;
a run kind declares the ones only it produces (``Kind.causes``), and
``workers.contract.kinds.cause`` knows them all. A cause nobody declared is
a bug, not something to guess at: tests check every cause a runner can write.
"""

from __future__ import annotations

# `python -m workers.run` exits with one of these.
EXIT_SUCCEEDED = 0
EXIT_FAILED = 1
EXIT_INVALID_SPEC = 2
# Another live process owns the run directory; nothing in it was touched.
EXIT_RUN_DIR_BUSY = 3

SUCCEEDED, FAILED = "succeeded", "failed"
RESULT_STATUSES = (SUCCEEDED, FAILED)

NONE = ""
COMPLETED = "completed"
PROCESS_EXIT = "process_exit"
TIMEOUT = "timeout"
CANCELLED = "cancelled"
WORKER_LOST = "worker_lost"
TERMINATED = "terminated"
SPEC_INVALID = "spec_invalid"
START_FAILED = "start_failed"
# The run's own code or arguments failed before it did any work (a missing
# script, an import error, a traceback before the first step): the user's
# to fix, never restarted, and no evidence against the environment.
JOB_ERROR = "job_error"
# No progress for the spec's hang_timeout_s (docs/diagnosis.md): on_hang=fail ends the run,
# on_hang=requeue ends the attempt as a restartable failure.
HANG = "hang"
HANG_REQUEUED = "hang_requeued"
# stop_on_nan: the first NaN/Inf in a tracked loss ended the run.
NAN_LOSS = "nan_loss"


class Cause:
    """One reason a run attempt ended.

    ``infrastructure``: the machine or the platform failed, not the job, so
    CI may retry it. ``restartable``: a run with restarts left goes on as a
    new attempt after it. ``blames_host``: the host itself may be why (a
    process that died there, a start that failed there), so a run that ends
    this way too often on one host is not placed there again; a worker that
    was killed or lost the platform says nothing about the host, and a
    single-host setup keeps all its restarts.
    """

    def __init__(
        self,
        name: str,
        label: str,
        infrastructure: bool = False,
        restartable: bool = False,
        blames_host: bool = False,
    ) -> None:
        self.name = name
        self.label = label
        self.infrastructure = infrastructure
        self.restartable = restartable
        self.blames_host = blames_host

    def __repr__(self) -> str:
        return f"Cause({self.name!r})"


CORE_CAUSES = {
    cause.name: cause
    for cause in (
        Cause(NONE, "—"),
        Cause(COMPLETED, "Completed"),
        Cause(PROCESS_EXIT, "Process exited", restartable=True, blames_host=True),
        Cause(TIMEOUT, "Timed out"),
        Cause(CANCELLED, "Cancelled"),
        Cause(WORKER_LOST, "Worker lost", infrastructure=True, restartable=True),
        Cause(
            TERMINATED,
            "Terminated on the host",
            infrastructure=True,
            restartable=True,
            blames_host=True,
        ),
        Cause(SPEC_INVALID, "Spec refused by the host"),
        Cause(
            START_FAILED, "Could not start", infrastructure=True, restartable=True, blames_host=True
        ),
        Cause(JOB_ERROR, "Job error"),
        Cause(HANG, "Hung (no progress)"),
        Cause(HANG_REQUEUED, "Hung, requeued", restartable=True),
        Cause(NAN_LOSS, "Stopped on a NaN loss"),
    )
}


# The `npulab` CLI's exit codes: what a CI pipeline gates on (docs/ci.md).
CLI_SUCCEEDED = 0
CLI_JOB_FAILED = 1  # the run failed through the job: its code, its data, its spec
CLI_USAGE = 2  # invalid input or usage: nothing was submitted
CLI_INFRASTRUCTURE = 3  # worker lost, host unhealthy, timeout on the host: safe to retry
CLI_GAVE_UP = 4  # --timeout passed before the run ended; it goes on
CLI_CANCELLED = 5
CLI_UNREACHABLE = 6  # the platform could not be reached, or refused the token
# The run failed and its diagnosis blames the stack (CANN, driver, torch_npu), not the
# script: a CI job reports it to whoever keeps the hosts (docs/diagnosis.md).
CLI_STACK_FAILED = 7
