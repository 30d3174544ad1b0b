"""Checks a host runs before its share of a run across hosts starts (docs/multihost.md).

A failed check refuses the attempt: the host reports it as a start failure that
names the check, and the platform ends the gang on every host, naming this one.
"""

from __future__ import annotations

import socket
from typing import Any

from workers.collect import hccn
from workers.contract.gang import RENDEZVOUS


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
        problems += _super_pods(gang)
        problems += _links(devices)
        problems += _peers(gang, devices)
    return problems


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


def _links(devices: list[int]) -> list[str]:
    problems = []
    for index in devices:
        try:
            state = hccn.link(index)
        except hccn.HccnError as exc:
            problems.append(f"device link of device {index}: {exc}")
            continue
        if state != "UP":
            problems.append(f"device link of device {index} is {state} (hccn_tool -link -g)")
    return problems


def _peers(gang: dict[str, Any], devices: list[int]) -> list[str]:
    """Every other host's device IPs answer a ping from this host's first device."""
    if not devices:
        return []
    problems = []
    for peer in gang.get("peers", []):
        if peer["node_rank"] == gang["node_rank"]:
            continue
        for index, address in sorted(peer.get("device_ips", {}).items()):
            try:
                sent, received = hccn.ping(devices[0], address)
            except hccn.HccnError as exc:
                problems.append(f"peer {peer['host']} device {index} ({address}): {exc}")
                continue
            if received == 0:
                problems.append(
                    f"peer {peer['host']} device {index} ({address}) is unreachable: "
                    f"{sent} packets sent, none received"
                )
            elif received < sent:
                # hccn_tool itself calls a lost packet a failure; HCCL's links would too.
                problems.append(
                    f"peer {peer['host']} device {index} ({address}) lost "
                    f"{sent - received} of {sent} packets"
                )
    return problems
