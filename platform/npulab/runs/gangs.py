"""A run attempt's placements: leased together, claimed and ended host by host.

An attempt holds one ``Placement`` per host (``Run.hosts``). They are leased
in one transaction by the placement pass (``create_placements``), each host
claims and reports its own, and the attempt ends once every placement has
ended: with the first failure, naming its host and ranks, when one failed;
the others are stopped as soon as it is known (the events acknowledgement
says ``cancel``). ``runs.services`` holds the state changes; this module
holds what they compute.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import models
from django.utils import timezone

from npulab.hosts.models import Host
from npulab.runs.models import DeviceLease, Placement, Run
from npulab.series.blocks import Block
from npulab.snapshots.models import Snapshot
from workers.contract import gang as contract
from workers.contract import ranks as contract_ranks
from workers.contract.events import ARTIFACT, LOG, METRIC, RESULT

# Rendezvous ports the platform hands out on rank 0's host, one per active gang there.
MASTER_PORTS = range(29500, 30500)
PORT_REST_S = 600
ENDED_BADLY = (Placement.State.FAILED, Placement.State.LOST)


def create_placements(
    run: Run, shares: list[tuple[Host, list[int]]], now: datetime
) -> list[Placement]:
    """Lease every share's devices and make the attempt's placements, node rank 0 first."""
    DeviceLease.objects.bulk_create(
        DeviceLease(host=host, device_index=index, run=run)
        for host, indices in shares
        for index in indices
    )
    roles = [rule.get("role", "") for rule in run.placement_rules] or [""] * len(shares)
    placements = [
        Placement(
            run=run,
            attempt=run.attempt,
            node_rank=node,
            role=roles[node],
            host=host,
            host_name=host.name,
            device_indices=indices,
            first_rank=node * run.devices,
            ranks=run.devices,
            leased_at=now,
        )
        for node, (host, indices) in enumerate(shares)
    ]
    if run.rendezvous:
        placements[0].master_port = free_master_port(shares[0][0])
    # An attempt number used before (a requeue of a dispatched run that was never claimed)
    # leases anew.
    Placement.objects.filter(run=run, attempt=run.attempt).delete()
    return Placement.objects.bulk_create(placements)


def free_master_port(host: Host) -> int:
    """The lowest rendezvous port no active gang holds on ``host``.

    The host worker checks that nothing else listens there before it starts.
    """
    # Nor one a gang there let go of lately: its processes may still be stopping.
    recent = timezone.now() - timedelta(seconds=PORT_REST_S)
    taken = set(
        Placement.objects.filter(host=host, node_rank=0, master_port__isnull=False)
        .filter(models.Q(state__in=Placement.ACTIVE) | models.Q(finished_at__gte=recent))
        .values_list("master_port", flat=True)
    )
    return next(port for port in MASTER_PORTS if port not in taken)


def current(run: Run) -> list[Placement]:
    return list(Placement.objects.filter(run=run, attempt=run.attempt).select_related("host"))


def placement_on(run: Run, host: Host) -> Placement | None:
    """The current attempt's placement on ``host``, if it has one."""
    return Placement.objects.filter(run=run, attempt=run.attempt, host=host).first()


def stop_asked(run: Run) -> bool:
    """Whether the attempt's other hosts must stop: one placement already failed."""
    return Placement.objects.filter(run=run, attempt=run.attempt, state__in=ENDED_BADLY).exists()


def shares_to_stop(host: Host) -> list[int]:
    """Runs whose share on ``host`` (not node rank 0's) must stop: cancelled, or a host failed."""
    shares = Placement.objects.filter(
        host=host, node_rank__gt=0, state=Placement.State.RUNNING, run__status=Run.Status.RUNNING
    )
    failed = Placement.objects.filter(
        run_id=models.OuterRef("run_id"),
        attempt=models.OuterRef("attempt"),
        state__in=ENDED_BADLY,
    )
    return list(
        shares.filter(models.Q(run__cancel_requested=True) | models.Exists(failed)).values_list(
            "run_id", flat=True
        )
    )


def share_spec(run: Run, placement: Placement | None) -> dict[str, Any]:
    """The spec a host runs its share with: a placement apart runs on its own device type
    (a parity run's CPU reference beside an NPU side), so its host's supervisor, backend
    and visible devices are that type's."""
    if placement is None or not run.placement_rules:
        return run.spec
    device_type = run.placement_rules[placement.node_rank]["device_type"]
    if device_type == run.spec["device_type"]:
        return run.spec
    return {**run.spec, "device_type": device_type}


def gang_of(
    run: Run, placement: Placement, placements: list[Placement] | None = None
) -> dict[str, Any]:
    """The claim reply's ``gang``: the rendezvous, this host's ranks and, on NPU, a rank table.

    Placements apart learn only which node they are, its role, and of how many.
    ``placements``: the attempt's, with their hosts, where the caller has read them.
    """
    if not run.rendezvous:
        return {
            "hosts": run.hosts,
            "node_rank": placement.node_rank,
            "role": placement.role,
            "first_rank": placement.first_rank,
            "local_world_size": placement.ranks,
            "world_size": run.world_size,
            contract.RENDEZVOUS: False,
        }
    if placements is None:
        placements = current(run)
    master = placements[0]
    network = master.host.network if master.host else {}
    own = placement.host.network if placement.host else {}
    gang: dict[str, Any] = {
        "hosts": run.hosts,
        "node_rank": placement.node_rank,
        "first_rank": placement.first_rank,
        "local_world_size": placement.ranks,
        "world_size": run.world_size,
        # Placement gives a gang only hosts that advertise an address (runs.placement).
        "master_addr": network.get(contract.ADVERTISE_ADDRESS, ""),
        "master_port": master.master_port,
        "peers": [
            {
                "node_rank": other.node_rank,
                "host": other.host_name,
                "address": (other.host.network if other.host else {}).get(
                    contract.ADVERTISE_ADDRESS, ""
                ),
                "devices": other.device_indices,
                "device_phy_ids": _device_ids(other, contract.DEVICE_PHY_ID),
                "device_ips": _device_ips(other),
                "super_device_ids": _device_ids(other, contract.DEVICE_SDID),
                "super_pod_ids": _device_ids(other, contract.DEVICE_SUPER_POD_ID),
                "versions": _versions(other),
            }
            for other in placements
        ],
    }
    if run.device_type == "npu":
        gang["hccl"] = {
            "if_ip": own.get("hccl_if_ip", ""),
            "socket_ifname": own.get("hccl_socket_ifname", ""),
            "connect_timeout": contract.connect_timeout(own.get("hccl_connect_timeout")),
        }
        gang["rank_table"] = contract.rank_table(
            [
                {
                    "server_id": (other.host.network if other.host else {}).get(
                        contract.ADVERTISE_ADDRESS, other.host_name
                    ),
                    "device_indices": other.device_indices,
                    "device_phy_ids": _device_ids(other, contract.DEVICE_PHY_ID),
                    "device_ips": _device_ips(other),
                    "super_device_ids": _device_ids(other, contract.DEVICE_SDID),
                    "super_pod_ids": _device_ids(other, contract.DEVICE_SUPER_POD_ID),
                    "first_rank": other.first_rank,
                }
                for other in placements
            ]
        )
    return gang


# What must match on every host of a gang (the pre-flight compares them).
MATCHING_VERSIONS = ("driver", "cann", "torch", "torch_npu")


def _versions(placement: Placement) -> dict[str, str]:
    """The host's driver, CANN, torch and torch_npu from its newest snapshot ({} if none).

    Its summary alone: a snapshot's data (every package, the environment) is a claim's
    largest read otherwise, and each host of a gang claims with every peer's versions.
    """
    summary = (
        Snapshot.objects.filter(host_id=placement.host_id)
        .order_by("-last_seen")
        .values_list("summary", flat=True)
        .first()
        if placement.host_id
        else None
    ) or {}
    return {key: str(summary[key]) for key in MATCHING_VERSIONS if summary.get(key)}


def _device_ips(placement: Placement) -> dict[str, str]:
    """The placement's devices' IPs, as its host's worker found them (``hccn_tool -ip -g``)."""
    return {
        index: str(value)
        for index, value in _device_values(placement, contract.DEVICE_IP).items()
        if value
    }


def _device_ids(placement: Placement, key: str) -> dict[str, int]:
    """A whole-number id of each of the placement's devices that has one (its physical id
    from ``npu-smi info -m``; on Atlas A3, its SDID or super pod id from ``npu-smi info -t
    spod-info``); 0 is an id like any other."""
    return {
        index: int(value)
        for index, value in _device_values(placement, key).items()
        if type(value) is int and value >= 0
    }


def _device_values(placement: Placement, key: str) -> dict[str, Any]:
    """``key`` of each of the placement's devices that reported it, by index as a string."""
    devices = placement.host.devices if placement.host else []
    values = {}
    for device in devices if isinstance(devices, list) else []:
        if isinstance(device, dict) and key in device and "index" in device:
            values[str(device["index"])] = device[key]
    return {index: values[index] for index in map(str, placement.device_indices) if index in values}


def first_failure(placements: list[Placement]) -> Placement | None:
    """The placement that failed first: by when its process exited, then when it was told."""
    failed = [p for p in placements if p.state in ENDED_BADLY]
    if not failed:
        return None
    return min(failed, key=lambda p: (p.exited_at or p.finished_at or p.leased_at, p.node_rank))


def failure_reason(placement: Placement) -> str:
    """The attempt's reason when a placement failed: its host and first failing rank first,
    or, for placements apart, its host and role."""
    if placement.role:
        return f"host {placement.host_name} ({placement.role}): {placement.exit_reason}"
    first, last = placement.rank_range
    ranks = f"rank {first}" if first == last else f"ranks {first}-{last}"
    return f"host {placement.host_name} ({ranks}) failed first: {placement.exit_reason}"


def from_other_node(
    run: Run, placement: Placement, events: list[Any]
) -> tuple[list[Any], dict[str, Any] | None]:
    """What a batch of a gang's host other than node rank 0 keeps, and its share's result.

    Its log lines, marked with the node; the metrics of its ranks that the spec's
    ``metric_ranks`` names (each under its rank's key, ``loss@rank3``: never one of rank
    0's series); the files of its ranks it announced (their traces, ``rank3-…``), which it
    uploads itself; any event naming one of its ranks as its ``rank`` (a shard of a
    sharded checkpoint); nothing else: rank 0 saves the checkpoints and gives the run its
    result, while this host's result ends its placement only.
    """
    wanted = run.spec.get(contract_ranks.METRIC_RANKS, contract_ranks.DEFAULT_METRIC_RANKS)
    first, last = placement.rank_range

    def own_rank(key: Any) -> bool:
        if not isinstance(key, str):
            return False
        rank = contract_ranks.key_rank(key)[1]
        return first <= rank <= last and rank > 0 and contract_ranks.includes(wanted, rank)

    kept: list[Any] = []
    result = None
    for event in events:
        if type(event) is Block:
            if own_rank(event.key):
                kept.append(event)
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == RESULT:
            result = {k: v for k, v in event.items() if k not in ("type", "time")}
        elif kind == LOG:
            kept.append(dict(event, node=placement.node_rank))
        elif kind == METRIC and own_rank(event.get("key")):
            kept.append(event)
        elif kind == ARTIFACT and _kept_artifact(placement, event):
            kept.append(dict(event, node=placement.node_rank))
        elif _own_rank_event(placement, event):
            # An event that names a rank of this host as its writer (a rank's shard of a
            # sharded checkpoint) is that rank's, whatever its type.
            kept.append(dict(event, node=placement.node_rank))
    return kept, result


def uploads_file(run_id: int, attempt: int, host: Host, name: str) -> bool:
    """Whether a gang's host other than node rank 0 may upload the attempt's file ``name``:
    only one named for a rank it holds (``rank3-trace-1.json.gz``, workers.contract.ranks);
    the run's other files (a diagnosis, a checkpoint) are node rank 0's."""
    rank = contract_ranks.file_rank(name)
    if rank == 0:
        return False
    placement = Placement.objects.filter(run_id=run_id, attempt=attempt, host=host).first()
    if placement is None:
        return False
    first, last = placement.rank_range
    return first <= rank <= last


def _own_rank_event(placement: Placement, event: dict[str, Any]) -> bool:
    rank = event.get("rank")
    first, last = placement.rank_range
    return type(rank) is int and rank > 0 and first <= rank <= last


def _kept_artifact(placement: Placement, event: dict[str, Any]) -> bool:
    """An artifact event of another host is kept when it names a file of one of its ranks."""
    name = event.get("name")
    rank = contract_ranks.file_rank(name) if isinstance(name, str) else 0
    first, last = placement.rank_range
    return rank > 0 and first <= rank <= last
