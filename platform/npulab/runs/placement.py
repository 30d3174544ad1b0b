"""Placement rules: which hosts a run may use, ever and now, and why not.

Every rule that decides where a run may go is here, and nowhere else: the
project's pools, the device type and count, the labels, the hosts a run
avoids after failing there, and the host's and its devices' health. The
scheduler (``runs.scheduler``) applies them in its pass, the submit check
(``runs.services.do_submit_run``) refuses what no host could ever take, the
pending reason says why a queued run waits, and a restart asks whether any
host is left.

Two questions, kept apart:

- "ever" (``unsuited``, ``unplaceable``): what a host is (its pool, device
  type and count, labels, and the run's faults there). A disabled, offline,
  drained or busy host comes back, so its state and load do not count.
- "now" (``Capacity.excluded``, ``Capacity.unfit``, ``plan``): the host is
  enabled, alive, not closed by its health, and has enough free devices.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from npulab.health.models import DEVICE_STATES_CLOSED, DeviceHealth, HostState
from npulab.health.selectors import health_of, reasons_text
from npulab.hosts.models import Host
from npulab.runs.models import DeviceLease, Run
from workers.contract.frameworks import WORKER_LABELS
from workers.contract.gang import ADVERTISE_ADDRESS, RUN_NETWORK, RUN_NETWORK_NONE

# A run is never placed again on a host where it failed this often for a cause that
# blames the host.
FAILURES_BEFORE_AVOIDING = 2
# Hosts a reason names, at most: enough to see what exists.
HOSTS_LISTED = 4


# -- ever: what a host is -------------------------------------------------------


def outside_pools(run: Run, host: Host) -> str:
    """Why ``host`` is not one the run's project may use, or ""."""
    if host.pool_id in run.pool_ids:
        return ""
    return f"is not in a pool of project '{run.project.slug}'"


def missing_labels(run: Run, host: Host) -> list[str]:
    return [label for label in run.labels if label not in host.labels]


def unreported_labels(run: Run, host: Host) -> list[str]:
    """The run's labels that a worker reports from its own configuration (WORKER_LABELS) and
    the host's does not: it lacks what they stand for, whatever an operator said. A run that
    names its own interpreter brings that itself."""
    if run.spec.get("python"):
        return []
    reported = host.reported_labels
    return [label for label in run.labels if label in WORKER_LABELS and label not in reported]


def label_gap(run: Run, host: Host) -> str:
    """Why ``host`` does not have what the run's labels ask for, or ""."""
    missing = missing_labels(run, host)
    if missing:
        return "lacks label(s) " + ", ".join(missing) + _reported(missing, host)
    unreported = unreported_labels(run, host)
    if unreported:
        return f"has label(s) {', '.join(unreported)}, but its worker reports no " + _meaning(
            unreported
        )
    return ""


def _labels_of(run: Run, host: Host) -> str:
    """A host's labels for a refusal, with what its worker says of the run's."""
    own = f"{host.name} has {', '.join(host.labels) or 'none'}"
    missing = missing_labels(run, host)
    if missing:
        return own + _reported(missing, host)
    unreported = unreported_labels(run, host)
    return own + (f", but its worker reports no {_meaning(unreported)}" if unreported else "")


def _reported(missing: list[str], host: Host) -> str:
    """What the host's worker says of the labels an operator has not given it."""
    reported = [label for label in missing if label in host.reported_labels]
    if reported:
        return (
            f" (its worker reports {', '.join(reported)}; an operator gives labels: "
            "host_token --labels, or the admin)"
        )
    unreported = [label for label in missing if label in WORKER_LABELS]
    return f" (its worker reports no {_meaning(unreported)} either)" if unreported else ""


def _meaning(labels: list[str]) -> str:
    return " nor ".join(WORKER_LABELS[label] for label in labels)


def avoided(run: Run, host: Host) -> str:
    """Why the run avoids ``host`` after failing there, or ""."""
    faults = run.host_faults.get(host.name, 0)
    return f"failed this run {faults} times" if faults >= FAILURES_BEFORE_AVOIDING else ""


def unsuited(run: Run, host: Host) -> str:
    """Why ``host`` can never take this run, whatever its state and load; "" if it can."""
    outside = outside_pools(run, host)
    if outside:
        return outside
    if host.device_type != run.device_type:
        return f"has {host.device_type} devices, the run needs {run.device_type}"
    gap = label_gap(run, host)
    if gap:
        return gap
    if run.hosts > 1 and gang_problem(host):
        return gang_problem(host)
    return avoided(run, host)


def gang_problem(host: Host) -> str:
    """Why ``host`` can take no part in a run across hosts, or ""."""
    if not host.network.get(ADVERTISE_ADDRESS):
        # MASTER_ADDR and a rank table's server_id come from it, never from a guess.
        return "has no advertise_address in its config (needed by a run across hosts)"
    if host.network.get(RUN_NETWORK) == RUN_NETWORK_NONE:
        return "keeps its runs off the network (run_network none), which a run across hosts needs"
    return ""


def unplaceable(run: Run, hosts: Iterable[Host]) -> tuple[str, str]:
    """(field, why) when none of ``hosts`` could ever take this run; ("", "") if one could.

    "Ever": a host's state and load do not matter (a disabled or offline host
    comes back), only what it is: its device type and count and its labels. A
    host whose worker never registered is known by name only, so it cannot be
    held against a run that names it.
    """
    hosts = list(hosts)
    if run.requested_host and run.hosts > 1:
        return "host", f"a run on {run.hosts} hosts cannot name one host; use labels or a pool"
    if run.requested_host:
        return _unplaceable_on_named(run, hosts)
    usable = [host for host in hosts if not outside_pools(run, host)]
    if hosts and not usable:
        return "project", f"no host is in a pool of project '{run.project.slug}'"
    registered = [host for host in usable if host.registered is not None]
    typed = [host for host in registered if host.device_type == run.device_type]
    if not typed:
        if not registered:
            return (
                "device_type",
                f"no host is registered yet (the run needs a {run.device_type} host)",
            )
        found = _listing(registered, lambda host: f"{host.name} has {_devices(host)}")
        return "device_type", f"no {run.device_type} host is registered: {found}"
    labelled = [host for host in typed if not label_gap(run, host)]
    if not labelled:
        found = _listing(typed, lambda host: _labels_of(run, host))
        return (
            "labels",
            f"no {run.device_type} host carries label(s) {', '.join(run.labels)}: {found}",
        )
    if not any(host.device_count >= run.devices for host in labelled):
        found = _listing(labelled, lambda host: f"{host.name} has {host.device_count}")
        return "devices", f"no {_wanted(run)} has {run.devices} devices: {found}"
    big = [
        host
        for host in labelled
        if host.device_count >= run.devices and (run.hosts == 1 or not gang_problem(host))
    ]
    if len(big) < run.hosts:
        found = _listing(big, lambda host: host.name)
        return "hosts", (
            f"the run needs {run.hosts} hosts × {run.devices} {run.device_type}; "
            f"{len(big)} such host{'s' if len(big) != 1 else ''} could ever take it: {found}"
        )
    return "", ""


def _unplaceable_on_named(run: Run, hosts: list[Host]) -> tuple[str, str]:
    name = run.requested_host
    host = next((host for host in hosts if host.name == name), None)
    if host is None:
        return "host", no_such_host(name, hosts)
    outside = outside_pools(run, host)
    if outside:
        return "host", f"host '{name}' {outside}"
    if host.registered is None:
        return "", ""
    if host.device_type != run.device_type:
        return "device_type", f"host '{name}' has {_devices(host)}, the run needs {run.device_type}"
    gap = label_gap(run, host)
    if gap:
        return "labels", f"host '{name}' {gap}"
    if host.device_count < run.devices:
        return "devices", f"host '{name}' has {_devices(host)}, the run needs {run.devices}"
    return "", ""


def hosts_left(run: Run) -> bool:
    """Whether any enabled host, online or not, could still take the run after its failures.

    Without one, a restart would wait in the queue for ever: a script that
    crashes every time on the only host must end as failed instead.
    """
    candidates = Host.objects.filter(enabled=True, device_type=run.device_type)
    if run.requested_host:
        candidates = candidates.filter(name=run.requested_host)
    return sum(1 for host in candidates if not unsuited(run, host)) >= run.hosts


def no_such_host(name: str, hosts: list[Host]) -> str:
    """Why a run cannot name ``name`` as its host, and which hosts there are."""
    if not hosts:
        return f"no host named '{name}'; there are no hosts yet"
    return f"no host named '{name}'; the hosts are {_listing(hosts, lambda host: host.name)}"


# -- health: what is closed now ---------------------------------------------------


def health_block(host: Host) -> str:
    """Why no new run may go to ``host`` because of its health, or "".

    Read from ``host.health``: load hosts with ``select_related("health")`` to keep it one query.
    """
    health = health_of(host)
    if health is None:  # no rule has seen it yet: healthy
        return ""
    if health.state == HostState.DRAINED:
        return f"is drained: {health.drain_note}" if health.drain_note else "is drained"
    if health.state in (HostState.UNHEALTHY, HostState.OFFLINE):
        return f"is {health.state}: {reasons_text(health.reasons)}"
    return ""


def closed_devices() -> dict[int, set[int]]:
    """Per host id, the device indices no new run may lease (bad or unhealthy): one query."""
    closed: dict[int, set[int]] = defaultdict(set)
    rows = DeviceHealth.objects.filter(state__in=DEVICE_STATES_CLOSED).values_list(
        "host_id", "index"
    )
    for host_id, index in rows:
        closed[host_id].add(index)
    return closed


# -- now: a pass's view of the hosts ---------------------------------------------------


@dataclass
class Capacity:
    """A host as one placement pass sees it: alive or not, and its free devices."""

    host: Host
    alive: bool
    free: list[int] = field(default_factory=list)

    def excluded(self, run: Run) -> str:
        """Why this host is out of the question for the run whatever its load, or ""."""
        if not self.host.enabled:
            return "is disabled"
        if self.host.devices_unverified:
            return self.host.devices_unverified
        if not self.alive:
            return "is offline"
        return health_block(self.host) or unsuited(run, self.host)

    def unfit(self, run: Run) -> str:
        """Why the run cannot go here now, or "" if it can."""
        excluded = self.excluded(run)
        if excluded:
            return excluded
        total = self.host.device_count
        if total < run.devices:
            return f"has {total} {self.host.device_type} device(s), the run needs {run.devices}"
        if len(self.free) < run.devices:
            return f"has {len(self.free)} of {total} devices free, the run needs {run.devices}"
        return ""


def capacities(hosts: list[Host], now: datetime) -> list[Capacity]:
    """Each of ``hosts`` with its free devices: not leased, not closed by health."""
    taken: dict[int, set[int]] = defaultdict(set)
    for host_id, index in DeviceLease.objects.values_list("host_id", "device_index"):
        taken[host_id].add(index)
    for host_id, indices in closed_devices().items():
        taken[host_id] |= indices
    return [
        Capacity(
            host=host,
            alive=host.is_alive(now),
            free=[i for i in range(host.device_count) if i not in taken[host.id]],
        )
        for host in hosts
    ]


def plan(run: Run, caps: list[Capacity]) -> tuple[Capacity | None, str]:
    """The host to place ``run`` on, or None and the reason it stays queued.

    Among the hosts that fit, a restarted run prefers those where it failed
    least, then the one left with the fewest free devices (best fit, which
    keeps whole hosts free for large runs).
    """
    if run.requested_host:
        named = [cap for cap in caps if cap.host.name == run.requested_host]
        if not named:
            return None, f"host '{run.requested_host}' does not exist"
        why = named[0].unfit(run)
        return (None, f"host '{run.requested_host}' {why}") if why else (named[0], "")

    fits = [cap for cap in caps if not cap.unfit(run)]
    if fits:
        return min(
            fits,
            key=lambda cap: (run.failed_hosts.get(cap.host.name, 0), len(cap.free), cap.host.name),
        ), ""
    return None, pending_reason(run, caps)


def plan_gang(run: Run, caps: list[Capacity]) -> tuple[list[Capacity], str]:
    """The hosts to place ``run`` on, node rank 0 first, or [] and why it stays queued.

    All or nothing: a gang takes ``run.hosts`` hosts that each fit now, or none,
    so two gangs never each hold half of what they need. Rank 0 goes to the
    host that best fits, as a single-host run would.
    """
    if run.hosts == 1:
        chosen, reason = plan(run, caps)
        return ([chosen] if chosen else []), reason
    fits = [cap for cap in caps if not cap.unfit(run)]
    if len(fits) >= run.hosts:
        fits.sort(
            key=lambda cap: (run.failed_hosts.get(cap.host.name, 0), len(cap.free), cap.host.name)
        )
        return fits[: run.hosts], ""
    return [], gang_pending_reason(run, caps, len(fits))


def gang_pending_reason(run: Run, caps: list[Capacity], fitting: int) -> str:
    """ "needs 4 hosts × 8 npu; 2 free, 1 busy, 1 is drained": what a waiting gang lacks."""
    counts: dict[str, int] = defaultdict(int)
    for cap in caps:
        if unsuited(run, cap.host) or cap.host.device_count < run.devices:
            continue
        if not cap.host.enabled:
            counts["disabled"] += 1
        elif not cap.alive:
            counts["offline"] += 1
        elif health_block(cap.host):
            state = cap.host.health.state
            counts["drained" if state == HostState.DRAINED else state] += 1
        elif len(cap.free) < run.devices:
            counts["busy"] += 1
    parts = [f"{fitting} free"] + [f"{count} {what}" for what, count in counts.items()]
    return f"needs {run.hosts} hosts × {run.devices} {run.device_type}; " + ", ".join(parts)


def pending_reason(run: Run, caps: list[Capacity]) -> str:
    """Why a run that no host can take now waits: what is missing, busy or closed."""
    matching = [cap for cap in caps if not cap.excluded(run)]
    if not matching:
        typed = [cap for cap in caps if cap.host.device_type == run.device_type]
        why = ", ".join(f"{cap.host.name} {cap.excluded(run)}" for cap in typed[:HOSTS_LISTED])
        return f"no online {_wanted(run)}" + (f" ({why})" if why else "")
    plural = "s" if run.devices != 1 else ""
    busy = ", ".join(
        f"{cap.host.name}: {len(cap.free)} of {cap.host.device_count} free"
        for cap in matching[:HOSTS_LISTED]
    )
    more = ", …" if len(matching) > HOSTS_LISTED else ""
    return f"no online host with {run.devices} free {run.device_type} device{plural} ({busy}{more})"


def waiting_for_host(why: str, until: datetime) -> str:
    """The pending reason of a run waiting for a host that could take it."""
    return (
        f"no registered host could take it ({why}); "
        f"waiting for one until {until.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    )


def _wanted(run: Run) -> str:
    return f"{run.device_type} host" + (
        " with label(s) " + ", ".join(run.labels) if run.labels else ""
    )


def _devices(host: Host) -> str:
    plural = "s" if host.device_count != 1 else ""
    return f"{host.device_count} {host.device_type} device{plural}"


def _listing(hosts: list[Host], describe: Callable[[Host], str]) -> str:
    """ "a, b, c, …": what exists, for a refusal."""
    more = ", …" if len(hosts) > HOSTS_LISTED else ""
    return ", ".join(describe(host) for host in hosts[:HOSTS_LISTED]) + more
