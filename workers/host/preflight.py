"""Checks a host runs before its share of a run across hosts starts (docs/multihost.md).

A failed check refuses the attempt: the host reports it as a start failure that
names the check, and the platform ends the gang on every host, naming this one.
hccn_tool is asked by each device's physical id (the gang's ``device_phy_ids``), the
messages name devices by the logical index the run leased.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from workers.collect import hccn
from workers.contract.gang import RENDEZVOUS, physical_id

log = logging.getLogger(__name__)


def preflight(gang: dict[str, Any], devices: list[int], device_type: str) -> list[str]:
    """What is wrong before this host's share starts; [] when every check passed.

    Placements apart (no rendezvous) never talk to each other, and differ on purpose (a
    parity run's sides on two stacks): nothing to check between them.
    """
    if gang.get(RENDEZVOUS) is False:
        return []
    problems: list[str] = _versions(gang)
    if gang["node_rank"] == 0:
        problems += _master_port(gang)
    if device_type == "npu":
        problems += _npu(gang, devices)
    return problems


def _npu(gang: dict[str, Any], devices: list[int]) -> list[str]:
    """Super pod membership, then the links HCCL will use: HCCS inside one super pod,
    the RoCE ports otherwise (across super pods, or servers in none)."""
    problems = _super_pods(gang) + _duplicate_sdids(gang)
    own = next((p for p in gang.get("peers", []) if p["node_rank"] == gang["node_rank"]), {})
    phy_ids = own.get("device_phy_ids") or {}
    named = [(index, physical_id(phy_ids, index)) for index in devices]
    pod = _one_super_pod(gang)
    if pod is None:
        return problems + _links(named) + _peers(gang, named)
    # HCCL talks over HCCS inside a super pod, and a rank table's device_ip is optional
    # there: a super pod whose RoCE links are down or unwired is no reason to refuse.
    log.info("gang inside super pod %s: HCCS checked, the RoCE links not", pod)
    return problems + _hccs_peers(gang, named, pod)


def _versions(gang: dict[str, Any]) -> list[str]:
    """The same driver, CANN, torch and torch_npu on every host (from their snapshots)."""
    problems = []
    peers = gang.get("peers", [])
    for key in sorted({key for peer in peers for key in peer.get("versions", {})}):
        # A host with no snapshot yet says nothing either way.
        seen = {
            peer["host"]: peer["versions"][key]
            for peer in peers
            if peer.get("versions", {}).get(key)
        }
        if len(set(seen.values())) > 1:
            found = ", ".join(f"{version} on {host}" for host, version in seen.items())
            problems.append(f"versions differ across hosts: {key} {found}")
    return problems


def _super_pods(gang: dict[str, Any]) -> list[str]:
    """Every host of the gang in a super pod (Atlas A3: each leased device has an SDID),
    or none: HCCL has no rank table for a mix (workers.contract.gang.rank_table)."""
    in_pod, plain, incomplete = [], [], []
    for peer in gang.get("peers", []):
        # A platform from before super pods says nothing either way.
        if "devices" not in peer:
            continue
        sdids = peer.get("super_device_ids") or {}
        pods = peer.get("super_pod_ids") or {}
        missing = [str(i) for i in peer["devices"] if str(i) not in sdids or str(i) not in pods]
        if not sdids and not pods:
            plain.append(peer["host"])
        elif missing:
            incomplete.append(f"{peer['host']} (devices {', '.join(missing)})")
        else:
            in_pod.append(peer["host"])
    problems = []
    if plain and (in_pod or incomplete):
        problems.append(
            "super pod hardware differs across hosts: "
            + "; ".join(
                part
                for part in (
                    _hosts(in_pod, "an SDID for every device (Atlas A3)"),
                    _hosts(incomplete, "SDIDs for some devices only"),
                    _hosts(plain, "no SDID (no super pod)"),
                )
                if part
            )
            + " (npu-smi info -t spod-info)"
        )
    elif incomplete:
        problems.append(
            f"no SDID for some devices of {', '.join(incomplete)}, so no rank table of "
            "version 1.2 (npu-smi info -t spod-info)"
        )
    return problems


def _duplicate_sdids(gang: dict[str, Any]) -> list[str]:
    """No SDID twice in one super pod among the gang's devices: HCCL takes each rank's
    super_device_id for its device's identity in the super pod and fails obscurely on two."""
    holders: dict[tuple[int, int], list[str]] = {}
    for peer in gang.get("peers", []):
        sdids = peer.get("super_device_ids") or {}
        pods = peer.get("super_pod_ids") or {}
        for index in peer.get("devices", []):
            if str(index) in sdids and str(index) in pods:
                key = (pods[str(index)], sdids[str(index)])
                holders.setdefault(key, []).append(f"{peer['host']} device {index}")
    return [
        f"SDID {sdid} more than once in super pod {pod}: {', '.join(where)} "
        "(npu-smi info -t spod-info; HCCL needs one device per super_device_id)"
        for (pod, sdid), where in sorted(holders.items())
        if len(where) > 1
    ]


def _one_super_pod(gang: dict[str, Any]) -> int | None:
    """The super pod every leased device of the gang sits in, if they all sit in one."""
    pods = set()
    for peer in gang.get("peers", []):
        ids = peer.get("super_pod_ids") or {}
        if "devices" not in peer or any(str(i) not in ids for i in peer["devices"]):
            return None
        pods.update(ids[str(i)] for i in peer["devices"])
    return pods.pop() if len(pods) == 1 else None


def _device(index: int, phy_id: int) -> str:
    return f"device {index}" if index == phy_id else f"device {index} (physical id {phy_id})"


def _hosts(hosts: list[str], what: str) -> str:
    if not hosts:
        return ""
    return f"{', '.join(hosts)} {'has' if len(hosts) == 1 else 'have'} {what}"


def _master_port(gang: dict[str, Any]) -> list[str]:
    """Rank 0's host must be able to listen on the rendezvous port it was given."""
    port = int(gang["master_port"])
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As torch's TCPStore binds: a port in TIME_WAIT is free, one listened on is not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", port))
        except OSError as exc:
            return [f"master port {port}: cannot listen there ({exc.strerror})"]
    return []


def _links(named: list[tuple[int, int]]) -> list[str]:
    """Every leased device's RoCE port is up."""
    problems = []
    for index, phy_id in named:
        try:
            state = hccn.link(phy_id)
        except hccn.HccnError as exc:
            problems.append(f"device link of {_device(index, phy_id)}: {exc}")
            continue
        if state != "UP":
            problems.append(
                f"device link of {_device(index, phy_id)} is {state} (hccn_tool -link -g)"
            )
    return problems


def _peers(gang: dict[str, Any], named: list[tuple[int, int]]) -> list[str]:
    """Every other host's device IPs answer a RoCE ping from this host's first device."""
    if not named:
        return []
    problems = []
    for peer in _others(gang):
        for index, address in sorted(peer.get("device_ips", {}).items()):
            where = f"peer {peer['host']} device {index} ({address})"
            try:
                sent, received = hccn.ping(named[0][1], address)
            except hccn.HccnError as exc:
                problems.append(f"{where}: {exc}")
                continue
            problems += _lost(where, sent, received, "")
    return problems


def _hccs_peers(gang: dict[str, Any], named: list[tuple[int, int]], pod: int) -> list[str]:
    """Every other host's leased devices answer a ping over HCCS, by their SDID, from this
    host's first device."""
    if not named:
        return []
    problems = []
    for peer in _others(gang):
        sdids = peer.get("super_device_ids") or {}
        for index in peer.get("devices", []):
            sdid = sdids.get(str(index))
            if sdid is None:
                continue  # _super_pods names it
            where = f"peer {peer['host']} device {index} (SDID {sdid})"
            try:
                answer = hccn.hccs_ping(named[0][1], sdid)
            except hccn.HccnError as exc:
                problems.append(f"{where}: {exc}")
                continue
            if answer is None:
                log.warning(
                    "hccn_tool runs no HCCS ping on this board: the HCCS links inside super "
                    "pod %s go unchecked",
                    pod,
                )
                return problems
            problems += _lost(where, *answer, " over HCCS")
    return problems


def _others(gang: dict[str, Any]) -> list[dict[str, Any]]:
    return [peer for peer in gang.get("peers", []) if peer["node_rank"] != gang["node_rank"]]


def _lost(where: str, sent: int, received: int, how: str) -> list[str]:
    if received == 0:
        return [f"{where} is unreachable{how}: {sent} packets sent, none received"]
    if received < sent:
        # hccn_tool itself calls a lost packet a failure; HCCL's links would too.
        return [f"{where} lost {sent - received} of {sent} packets{how}"]
    return []
