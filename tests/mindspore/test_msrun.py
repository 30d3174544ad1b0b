"""msrun's command from a job's placements."""

from __future__ import annotations

import pytest

from workers.training.msrun import LAUNCH_SCRIPT, LOCALHOST, Placement, across_hosts, msrun_command


def test_one_host_with_four_devices() -> None:
    command = msrun_command(
        across_hosts(LOCALHOST, 1, 4), 0, ["train.py", "--lr", "0.1"], "/runs/7", python="py"
    )
    assert command == [
        "py",
        "-m",
        "mindspore.parallel.cluster.run",
        "--worker_num=4",
        "--local_worker_num=4",
        "--master_addr=127.0.0.1",
        "--master_port=8118",
        "--node_rank=0",
        "--log_dir=/runs/7/msrun",
        "--join=True",
        "--tail_worker_log=4",
        LAUNCH_SCRIPT,
        "train.py",
        "--lr",
        "0.1",
    ]


def test_the_second_of_two_hosts_names_rank_zeros_host_and_the_rank_table() -> None:
    placements = [Placement("10.0.0.1", 8), Placement("10.0.0.2", 4)]
    command = msrun_command(
        placements, 1, ["t.py"], "/r", master_port=9000, rank_table_file="/r/rank_table.json"
    )
    assert command[3:10] == [
        "--worker_num=12",
        "--local_worker_num=4",
        "--master_addr=10.0.0.1",
        "--master_port=9000",
        "--node_rank=1",
        "--log_dir=/r/msrun",
        "--join=True",
    ]
    assert "--rank_table_file=/r/rank_table.json" in command


@pytest.mark.parametrize(
    ("placements", "rank"), [([], 0), ([Placement("a", 1)], 1), ([Placement("a", 0)], 0)]
)
def test_impossible_jobs_are_refused(placements: list[Placement], rank: int) -> None:
    with pytest.raises(ValueError, match=r"placement|node_rank"):
        msrun_command(placements, rank, ["t.py"], "/r")
