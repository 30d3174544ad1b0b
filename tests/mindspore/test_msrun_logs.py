"""msrun's worker logs relayed with their ranks, and what a worker started by msrun does first.

No MindSpore needed: the logs are written here as msrun's workers write them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO_DIR
from workers.training.launch import adopt_msrun_ranks
from workers.training.msrun_logs import FailedRank, WorkerLogs

RANK_0 = (
    "npulab: rank 0 of 2, local rank 0, cpu device 0, pid 4100\nepoch: 1 step: 1, loss is 0.3\n"
)
RANK_1 = (
    "npulab: rank 1 of 2, local rank 1, cpu device 1, pid 4101\n"
    "Traceback (most recent call last):\n"
    '  File "/job/train.py", line 28, in step_end\n'
    "ValueError: rank 1 gives up\n"
)
# msrun's stderr once a worker failed (it kills the others and says which it saw first).
MSRUN_SAW = [
    "[ERROR] ME(4090:1,MainProcess):2026-12-05-08:55:37.248.000 [mindspore/parallel/cluster/"
    "process_entity/_api.py:365] Worker process 4101 exit with exception. Error code: 1.",
]


def relayed(log_dir: Path, files: dict[str, str]) -> tuple[list[bytes], WorkerLogs]:
    written: list[bytes] = []
    logs = WorkerLogs(str(log_dir), written.append)
    logs.start()
    for name, text in files.items():
        (log_dir / name).write_text(text)
    logs.stop()
    return written, logs


def test_each_workers_lines_come_whole_with_its_rank(tmp_path: Path) -> None:
    written, _ = relayed(
        tmp_path,
        {
            "scheduler.log": "cluster noise\n",
            "worker_0.log": RANK_0,
            # A last line without its newline still comes, once the workers have ended.
            "worker_1.log": RANK_1.splitlines(keepends=True)[0] + "weights 5.2",
        },
    )
    assert written == [
        b"[rank0]: npulab: rank 0 of 2, local rank 0, cpu device 0, pid 4100\n",
        b"[rank0]: epoch: 1 step: 1, loss is 0.3\n",
        b"[rank1]: npulab: rank 1 of 2, local rank 1, cpu device 1, pid 4101\n",
        b"[rank1]: weights 5.2\n",
    ]


def test_the_failed_rank_is_the_one_msrun_saw_fail_first(tmp_path: Path) -> None:
    _, logs = relayed(tmp_path, {"worker_0.log": RANK_0, "worker_1.log": RANK_1})
    failed = logs.failed(MSRUN_SAW)
    assert failed == FailedRank(1, RANK_1.splitlines(), 1)
    # Without msrun's word, the first rank whose log has a traceback.
    assert logs.failed([]) == FailedRank(1, RANK_1.splitlines(), None)


def test_a_worker_killed_without_a_traceback_is_named_by_its_exit(tmp_path: Path) -> None:
    _, logs = relayed(tmp_path, {"worker_0.log": RANK_0})
    killed = [MSRUN_SAW[0].replace("4101", "4100").replace("code: 1", "code: -9")]
    assert logs.failed(killed) == FailedRank(0, RANK_0.splitlines(), -9)
    assert logs.failed([]) is None


def test_a_worker_gets_torchs_rank_variables_from_msruns() -> None:
    # The host worker set RANK to the host's first rank; msrun gave this worker its own.
    env = {"RANK": "2", "RANK_ID": "3", "MS_WORKER_NUM": "4", "DEVICE_ID": "1"}
    adopt_msrun_ranks(env)
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"]) == ("3", "4", "1")


def test_msruns_scheduler_on_a_host_other_than_node_rank_zero_leaves_at_once(
    tmp_path: Path,
) -> None:
    # Two hosts of a run on one machine: the second's msrun takes the master address for its
    # own and starts a scheduler too; it must neither serve nor run the script.
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('the script ran')\n")
    env = dict(os.environ, PYTHONPATH=str(REPO_DIR), MS_ROLE="MS_SCHED", MS_WORKER_NUM="2")
    env["NODE_RANK"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "workers.training.launch", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert "node rank 0 hosts the job's" in done.stdout
