"""A run across hosts (a gang): the names both sides agree on, and the launch environment.

The platform's claim reply carries a ``gang`` object for every attempt (one host
is the case ``hosts == 1``); the host worker turns it into the variables
torch.distributed and HCCL read, and, on NPU hosts, into a rank table file.
Standard library only, Python 3.8.
"""

from __future__ import annotations

import json
from typing import Any

# The claim reply's key.
GANG = "gang"
# The gang's key that says whether its hosts rendezvous (torch.distributed, HCCL). Placements
# a kind puts apart, each on the host it asks for (a parity run's two sides, which may be
# different device types and stacks), never talk to each other: their hosts get no
# rendezvous, run no pre-flight against each other, and exchange files through the platform.
RENDEZVOUS = "rendezvous"
# What one placement may ask of its host, beyond the run's device type (a kind's
# ``placements``: workers.contract.kinds).
PLACEMENT_FIELDS = ("host", "pool", "labels")
# The spec's key: how many hosts a run spans (a kind that can span hosts declares it).
HOSTS = "hosts"
MAX_HOSTS = 64

# torch.distributed's rendezvous and rank variables, set on every host.
MASTER_ADDR = "MASTER_ADDR"
MASTER_PORT = "MASTER_PORT"
WORLD_SIZE = "WORLD_SIZE"
RANK = "RANK"
LOCAL_RANK = "LOCAL_RANK"
NODE_RANK = "NODE_RANK"
LOCAL_WORLD_SIZE = "LOCAL_WORLD_SIZE"
# npulab's own: hosts in the gang (torchrun --nnodes), and this host's first global rank.
NNODES = "NPULAB_NNODES"
FIRST_RANK = "NPULAB_FIRST_RANK"

# HCCL (Ascend): the rank table, the host interface it opens its sockets on, its timeout.
RANK_TABLE_FILE = "RANK_TABLE_FILE"
RANK_TABLE_NAME = "rank_table.json"
# HCCL's rank table versions: 1.0 for plain AI servers, 1.2 for an Atlas A3 super pod.
RANK_TABLE_VERSION = "1.0"
RANK_TABLE_VERSION_SUPER_POD = "1.2"
HCCL_IF_IP = "HCCL_IF_IP"
HCCL_SOCKET_IFNAME = "HCCL_SOCKET_IFNAME"
HCCL_CONNECT_TIMEOUT = "HCCL_CONNECT_TIMEOUT"
# HCCL accepts [120, 7200] s; its own default (120) is short for hosts that load a large
# model before the first collective, so 600 unless a host's config says otherwise.
HCCL_CONNECT_TIMEOUT_RANGE = (120, 7200)
HCCL_CONNECT_TIMEOUT_DEFAULT = 600

# The keys of a registered NPU device (a host's ``devices``) that a gang's rank table reads:
# its physical id where ``npu-smi info -m`` prints one, its network port's IP (``hccn_tool
# -i PHY -ip -g``), and on Atlas A3 its chip's SDID and super pod id (``npu-smi info -t
# spod-info -i NPU -c CHIP``). A device's ``index`` is its logical id, what
# ``ASCEND_RT_VISIBLE_DEVICES`` counts; hccn_tool's ``-i`` and a rank table's ``device_id``
# take the physical id, which differs from it in a container that maps a subset of the
# host's devices (devices 4-7 seen as 0-3).
DEVICE_PHY_ID = "phy_id"
DEVICE_IP = "ip"
DEVICE_SDID = "sdid"
DEVICE_SUPER_POD_ID = "super_pod_id"

# What a run's spec env may not set: the gang's own variables.
RESERVED_ENV = (
    MASTER_ADDR,
    MASTER_PORT,
    WORLD_SIZE,
    RANK,
    LOCAL_RANK,
    NODE_RANK,
    LOCAL_WORLD_SIZE,
    RANK_TABLE_FILE,
)

# The host config keys a worker reports (``network`` in its registration).
ADVERTISE_ADDRESS = "advertise_address"
# Whether a host's runs reach the network (``host``, docker's word) or only a loopback of
# their own (``none``): a run across hosts needs the former (docs/security.md).
RUN_NETWORK = "run_network"
RUN_NETWORK_HOST = "host"
RUN_NETWORK_NONE = "none"
RUN_NETWORKS = (RUN_NETWORK_HOST, RUN_NETWORK_NONE)
NETWORK_KEYS = (
    ADVERTISE_ADDRESS,
    "hccl_if_ip",
    "hccl_socket_ifname",
    "hccl_connect_timeout",
    RUN_NETWORK,
)


def launch_env(gang: dict[str, Any]) -> dict[str, str]:
    """The variables one host's share of a gang starts with.

    ``RANK``/``LOCAL_RANK`` are those of the host's first process; torchrun
    sets each process's own from ``NODE_RANK`` and ``LOCAL_WORLD_SIZE``. Placements
    apart (no rendezvous) learn only which node they are and of how many.
    """
    if gang.get(RENDEZVOUS) is False:
        return {NODE_RANK: str(gang["node_rank"]), NNODES: str(gang["hosts"])}
    env = {
        MASTER_ADDR: str(gang["master_addr"]),
        MASTER_PORT: str(gang["master_port"]),
        WORLD_SIZE: str(gang["world_size"]),
        RANK: str(gang["first_rank"]),
        LOCAL_RANK: "0",
        NODE_RANK: str(gang["node_rank"]),
        LOCAL_WORLD_SIZE: str(gang["local_world_size"]),
        NNODES: str(gang["hosts"]),
        FIRST_RANK: str(gang["first_rank"]),
    }
    hccl = gang.get("hccl") or {}
    if hccl.get("if_ip"):
        env[HCCL_IF_IP] = str(hccl["if_ip"])
    if hccl.get("socket_ifname"):
        env[HCCL_SOCKET_IFNAME] = str(hccl["socket_ifname"])
    if hccl:
        env[HCCL_CONNECT_TIMEOUT] = str(hccl.get("connect_timeout", HCCL_CONNECT_TIMEOUT_DEFAULT))
    return env


def connect_timeout(value: Any) -> int:
    """A host's HCCL_CONNECT_TIMEOUT, kept inside HCCL's valid range."""
    low, high = HCCL_CONNECT_TIMEOUT_RANGE
    if isinstance(value, bool) or not isinstance(value, int):
        return HCCL_CONNECT_TIMEOUT_DEFAULT
    return min(max(value, low), high)


def physical_id(phy_ids: dict[str, Any], index: int) -> int:
    """The physical id of the device of logical ``index``, from ``phy_ids`` (index as a
    string -> physical id, as a gang's peers and placements carry them); the logical
    index itself where its host found none (``npu-smi info -m`` prints none on Atlas A2
    and older, where on bare metal the two are the same)."""
    value = phy_ids.get(str(index))
    return value if type(value) is int and value >= 0 else index


def rank_table(placements: list[dict[str, Any]]) -> dict[str, Any]:
    """An HCCL rank table from the gang's placements in node-rank order.

    Each placement: ``server_id`` (the host's advertised address), ``device_indices``
    (its leased devices' logical ids, local rank order), ``device_phy_ids`` (index -> the
    device's physical id, HCCL's ``device_id``; an index without one stands for itself,
    ``physical_id``), ``device_ips`` (index -> the device's IP from ``hccn_tool -i PHY -ip
    -g``), ``super_device_ids`` and ``super_pod_ids`` (index -> the chip's SDID and super
    pod id from ``npu-smi info -t spod-info``; Atlas A3 only) and ``first_rank``.

    Version 1.2 (a super pod: each device's ``super_device_id``, and ``super_pod_list``)
    when every device of every placement has an SDID and a super pod id, else version 1.0.
    All or nothing, because no table serves a gang that is only partly in a super pod:
    HCCL checks every rank of a 1.2 table and refuses one without its
    ``super_device_id`` (``super_device_id[] is invalid``), while a 1.0 table has it
    treat every server as a plain AI server. The pre-flight refuses such a gang, naming
    its hosts (workers.host.preflight).
    """
    if placements and all(_in_super_pod(placement) for placement in placements):
        return _rank_table_super_pod(placements)
    servers = []
    for placement in placements:
        ips = placement.get("device_ips") or {}
        phy_ids = placement.get("device_phy_ids") or {}
        devices = []
        for local, index in enumerate(placement["device_indices"]):
            devices.append(
                {
                    "device_id": str(physical_id(phy_ids, index)),
                    "device_ip": str(ips.get(str(index), "")),
                    "rank_id": str(placement["first_rank"] + local),
                }
            )
        servers.append({"server_id": str(placement["server_id"]), "device": devices})
    return {
        "version": RANK_TABLE_VERSION,
        "server_count": str(len(servers)),
        "server_list": servers,
        "status": "completed",
    }


def _in_super_pod(placement: dict[str, Any]) -> bool:
    sdids = placement.get("super_device_ids") or {}
    pods = placement.get("super_pod_ids") or {}
    indices = placement["device_indices"]
    return bool(indices) and all(str(i) in sdids and str(i) in pods for i in indices)


def _rank_table_super_pod(placements: list[dict[str, Any]]) -> dict[str, Any]:
    """Version 1.2. HCCL wants one super pod's servers side by side in the table, so the
    servers are grouped by super pod, pods in order of their first node rank; each
    server's ranks stay its own contiguous range."""
    pods: dict[str, list[dict[str, Any]]] = {}
    for placement in placements:
        # A server sits in one super pod: its first device's says which.
        first = str(placement["device_indices"][0])
        pods.setdefault(str(placement["super_pod_ids"][first]), []).append(placement)
    servers = []
    for members in pods.values():
        for placement in members:
            ips = placement.get("device_ips") or {}
            phy_ids = placement.get("device_phy_ids") or {}
            devices = []
            for local, index in enumerate(placement["device_indices"]):
                device = {
                    "device_id": str(physical_id(phy_ids, index)),
                    "super_device_id": str(placement["super_device_ids"][str(index)]),
                }
                # Optional in 1.2 (a super pod's devices talk over HCCS); an empty one is
                # not an address.
                if ips.get(str(index)):
                    device["device_ip"] = str(ips[str(index)])
                device["rank_id"] = str(placement["first_rank"] + local)
                devices.append(device)
            servers.append({"server_id": str(placement["server_id"]), "device": devices})
    return {
        "version": RANK_TABLE_VERSION_SUPER_POD,
        "server_count": str(len(servers)),
        "server_list": servers,
        "super_pod_list": [
            {
                "super_pod_id": pod,
                "server_list": [{"server_id": str(member["server_id"])} for member in members],
            }
            for pod, members in pods.items()
        ],
        "status": "completed",
    }


def dumps_rank_table(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=2)
