"""MindSpore's own launcher, ``msrun``, for a run on several devices or hosts.

``msrun`` starts ``--local_worker_num`` processes of a script on this node, of
``--worker_num`` in the whole job; the node with ``--node_rank`` 0 hosts the scheduler at
``--master_addr:--master_port``. The command is built from the run's placements (one per
host: its address and its device count, rank 0's host first), so one host with several
devices is the case of a single placement. Standard library only, Python 3.8.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import NamedTuple, Sequence

# MindSpore's launcher module (the ``msrun`` console script calls its main).
MSRUN_MODULE = "mindspore.parallel.cluster.run"
DEFAULT_MASTER_PORT = 8118
LOCALHOST = "127.0.0.1"
# Where msrun writes each worker's log, inside the run directory.
LOG_DIR = "msrun"
LAUNCH_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch.py")


class Placement(NamedTuple):
    """One host of the job: the address the others reach it at, and its device count."""

    address: str
    devices: int


def msrun_command(
    placements: Sequence[Placement],
    node_rank: int,
    entry_args: Sequence[str],
    run_dir: str,
    master_port: int = DEFAULT_MASTER_PORT,
    python: str = "",
    rank_table_file: str = "",
) -> list[str]:
    """The command that starts this node's share of the job through msrun.

    ``entry_args``: what ``workers.training.launch`` gets (the entry and its arguments);
    msrun runs a script file, so it is given ``launch.py`` by path. ``rank_table_file``:
    HCCL's rank table where the job's NPUs need one.
    """
    if not placements:
        raise ValueError("a job needs at least one placement")
    if not 0 <= node_rank < len(placements):
        raise ValueError(f"node_rank {node_rank} is not one of the {len(placements)} placements")
    if any(placement.devices < 1 for placement in placements):
        raise ValueError("every placement needs at least one device")
    command = [
        python or sys.executable,
        "-m",
        MSRUN_MODULE,
        f"--worker_num={sum(placement.devices for placement in placements)}",
        f"--local_worker_num={placements[node_rank].devices}",
        f"--master_addr={placements[0].address}",
        f"--master_port={master_port}",
        f"--node_rank={node_rank}",
        f"--log_dir={os.path.join(run_dir, LOG_DIR)}",
        "--join=True",
        # msrun copies every worker's log to its console with ``tail -f``, killed as soon as
        # the workers end (their last lines may never come) and without saying whose line
        # is whose. Told a rank no worker has, it tails none: the runner relays the logs
        # (WorkerLogs).
        f"--tail_worker_log={sum(placement.devices for placement in placements)}",
    ]
    if rank_table_file:
        command.append(f"--rank_table_file={rank_table_file}")
    return [*command, LAUNCH_SCRIPT, *entry_args]


def across_hosts(master_addr: str, hosts: int, devices: int) -> list[Placement]:
    """The placements of a job of ``hosts`` hosts with ``devices`` each, node rank 0 at
    ``master_addr`` (only its address is msrun's to know)."""
    return [Placement(master_addr if node == 0 else "", devices) for node in range(hosts)]


def free_port(address: str = LOCALHOST) -> int:
    """A port free on this host now: the scheduler's, for a job on this host alone (a run
    across hosts gets its port from the platform). msrun's own default, 8118, would make two
    such runs on one host, or two hosts' runs on one machine, meet at one scheduler."""
    with socket.socket() as probe:
        probe.bind((address, 0))
        return int(probe.getsockname()[1])
