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

What a placement's host must be is a ``Wanted``: the run's own (its device
type, named host and labels) for every host of a run, or, for a run whose
kind puts its placements apart (``Run.placement_rules``: a parity run's two
sides), one per node rank, each on a host of its own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

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


# -- what a placement's host must be -----------------------------------------------


@dataclass(frozen=True)
class Wanted:
    """What one placement's host must be; ``field`` and ``role`` name it in a refusal
    ("b.host", "side b") when it is one node rank's of a run whose placements are apart."""

    device_type: str
    host: str = ""
    labels: tuple[str, ...] = ()
    pool_id: int | None = None
    pool: str = ""
    field: str = ""
    role: str = ""

    def named(self, key: str) -> str:
        """The submission field a refusal of ``key`` names: ``b.host``, or ``host``."""
        return f"{self.field}.{key}" if self.field else key

    def says(self, why: str) -> str:
        return f"{self.role}: {why}" if self.role else why


def wanted(run: Run) -> list[Wanted]:
    """What each node rank's host must be, node rank 0 first."""
    if not run.placement_rules:
        return [Wanted(run.device_type, run.requested_host, tuple(run.labels))] * run.hosts
    return [
        Wanted(
            device_type=rule["device_type"],
            host=rule.get("host", ""),
            labels=tuple(rule.get("labels", ())),
            pool_id=rule.get("pool_id"),
            pool=rule.get("pool", ""),
            field=rule.get("field", ""),
            role=rule.get("role", ""),
        )
        for rule in run.placement_rules
    ]


def _own(run: Run) -> Wanted:
    """Node rank 0's: every host's, in a run of alike hosts."""
    return wanted(run)[0]


T = TypeVar("T")


def distinct(options: list[list[T]], key: Callable[[T], object]) -> list[T] | None:
    """One item of each list, no two with the same ``key``, each list's earlier items
    preferred; None when there is no such choice. Augmenting paths (Kuhn): a later list may
    take an item an earlier one holds when that one can move to another of its own."""
    holder: dict[object, int] = {}
    chosen: list[T | None] = [None] * len(options)

    def assign(index: int, tried: set[object]) -> bool:
        for item in options[index]:
            mark = key(item)
            if mark in tried:
                continue
            tried.add(mark)
            if mark not in holder or assign(holder[mark], tried):
                holder[mark] = index
                chosen[index] = item
                return True
        return False

    for index in range(len(options)):
        if not assign(index, set()):
            return None
    return [item for item in chosen if item is not None]


# -- ever: what a host is -------------------------------------------------------


def outside_pools(run: Run, host: Host) -> str:
    """Why ``host`` is not one the run's project may use, or ""."""
    if host.pool_id in run.pool_ids:
        return ""
    return f"is not in a pool of project '{run.project.slug}'"


def missing_labels(want: Wanted, host: Host) -> list[str]:
    return [label for label in want.labels if label not in host.labels]


def unreported_labels(run: Run, want: Wanted, host: Host) -> list[str]:
    """The labels wanted that a worker reports from its own configuration (WORKER_LABELS) and
    the host's does not: it lacks what they stand for, whatever an operator said. A run that
    names its own interpreter brings that itself."""
    if run.spec.get("python"):
        return []
    reported = host.reported_labels
    return [label for label in want.labels if label in WORKER_LABELS and label not in reported]


def label_gap(run: Run, want: Wanted, host: Host) -> str:
    """Why ``host`` does not have what the labels ``want`` asks for, or ""."""
    missing = missing_labels(want, host)
    if missing:
        return "lacks label(s) " + ", ".join(missing) + _reported(missing, host)
    unreported = unreported_labels(run, want, host)
    if unreported:
        return f"has label(s) {', '.join(unreported)}, but its worker reports no " + _meaning(
            unreported
        )
    return ""


def _labels_of(run: Run, want: Wanted, host: Host) -> str:
    """A host's labels for a refusal, with what its worker says of the ones wanted."""
    own = f"{host.name} has {', '.join(host.labels) or 'none'}"
    missing = missing_labels(want, host)
    if missing:
        return own + _reported(missing, host)
    unreported = unreported_labels(run, want, host)
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


def unsuited(run: Run, host: Host, want: Wanted | None = None) -> str:
    """Why ``host`` can never take this run (the placement ``want`` of it: the run's own
    by default), whatever its state and load; "" if it can."""
    want = want or _own(run)
    outside = outside_pools(run, host)
    if outside:
        return outside
    if want.pool_id is not None and host.pool_id != want.pool_id:
        return f"is not in pool '{want.pool}'"
    if host.device_type != want.device_type:
        return f"has {host.device_type} devices, {want.role or 'the run'} needs {want.device_type}"
    gap = label_gap(run, want, host)
    if gap:
        return gap
    if run.rendezvous and gang_problem(host):
        return gang_problem(host)
    return avoided(run, host)


def gang_problem(host: Host) -> str:
    """Why ``host`` can take no part in a run across hosts that meet, or ""."""
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
    if run.placement_rules:
        return _unplaceable_apart(run, hosts)
    want = _own(run)
    if run.requested_host and run.hosts > 1:
        return "host", f"a run on {run.hosts} hosts cannot name one host; use labels or a pool"
    field, why, labelled = _unplaceable_one(run, want, hosts)
    if why or run.hosts == 1:
        return field, why
    big = [host for host in labelled if host.device_count >= run.devices and not gang_problem(host)]
    if len(big) < run.hosts:
        found = _listing(big, lambda host: host.name)
        return "hosts", (
            f"the run needs {run.hosts} hosts × {run.devices} {run.device_type}; "
            f"{len(big)} such host{'s' if len(big) != 1 else ''} could ever take it: {found}"
        )
    return "", ""


def _unplaceable_one(run: Run, want: Wanted, hosts: list[Host]) -> tuple[str, str, list[Host]]:
    """(field, why, []) when no host could ever be the placement ``want`` of the run; else
    ("", "", the registered hosts that could, by what they are)."""
    if want.host:
        field, why = _unplaceable_on_named(run, want, hosts)
        named = [host for host in hosts if host.name == want.host and host.registered]
        return field, why, [] if why else named
    usable = [host for host in hosts if not outside_pools(run, host)]
    if hosts and not usable:
        return "project", f"no host is in a pool of project '{run.project.slug}'", []
    if want.pool_id is not None:
        usable = [host for host in usable if host.pool_id == want.pool_id]
        if not usable:
            return want.named("pool"), want.says(f"no host is in pool '{want.pool}'"), []
    registered = [host for host in usable if host.registered is not None]
    typed = [host for host in registered if host.device_type == want.device_type]
    if not typed:
        if not registered:
            return (
                want.named("device_type"),
                want.says(
                    f"no host is registered yet ({want.role or 'the run'} needs a "
                    f"{want.device_type} host)"
                ),
                [],
            )
        found = _listing(registered, lambda host: f"{host.name} has {_devices(host)}")
        return (
            want.named("device_type"),
            want.says(f"no {want.device_type} host is registered: {found}"),
            [],
        )
    labelled = [host for host in typed if not label_gap(run, want, host)]
    if not labelled:
        found = _listing(typed, lambda host: _labels_of(run, want, host))
        return (
            want.named("labels"),
            want.says(
                f"no {want.device_type} host carries label(s) {', '.join(want.labels)}: {found}"
            ),
            [],
        )
    if not any(host.device_count >= run.devices for host in labelled):
        found = _listing(labelled, lambda host: f"{host.name} has {host.device_count}")
        return "devices", want.says(f"no {_wanted(want)} has {run.devices} devices: {found}"), []
    return "", "", labelled


def _unplaceable_on_named(run: Run, want: Wanted, hosts: list[Host]) -> tuple[str, str]:
    name = want.host
    host = next((host for host in hosts if host.name == name), None)
    if host is None:
        return want.named("host"), want.says(no_such_host(name, hosts))
    outside = outside_pools(run, host)
    if outside:
        return want.named("host"), want.says(f"host '{name}' {outside}")
    if want.pool_id is not None and host.pool_id != want.pool_id:
        return want.named("host"), want.says(f"host '{name}' is not in pool '{want.pool}'")
    if host.registered is None:
        return "", ""
    if host.device_type != want.device_type:
        needs = want.role or "the run"
        return (
            want.named("device_type"),
            want.says(f"host '{name}' has {_devices(host)}, {needs} needs {want.device_type}"),
        )
    gap = label_gap(run, want, host)
    if gap:
        return want.named("labels"), want.says(f"host '{name}' {gap}")
    if host.device_count < run.devices:
        return "devices", want.says(
            f"host '{name}' has {_devices(host)}, the run needs {run.devices}"
        )
    return "", ""


def _unplaceable_apart(run: Run, hosts: list[Host]) -> tuple[str, str]:
    """Each placement must be possible on its own, and all of them on different hosts (a
    host known by name only, never registered, counts as one that could)."""
    options = []
    for want in wanted(run):
        field, why, could = _unplaceable_one(run, want, hosts)
        if why:
            return field, why
        if want.host and not could:  # named, never registered: it may yet
            could = [host for host in hosts if host.name == want.host]
        options.append(
            [host for host in could if host.device_count >= run.devices or not host.registered]
        )
    if distinct(options, key=lambda host: host.name) is None:
        wants = wanted(run)
        found = _listing(
            list({host.name: host for option in options for host in option}.values()),
            lambda host: host.name,
        )
        return wants[-1].named("host"), (
            f"{' and '.join(want.role or 'a placement' for want in wants)} each need a host of "
            f"their own; the hosts that could take them: {found}"
        )
    return "", ""


def hosts_left(run: Run) -> bool:
    """Whether enabled hosts, online or not, could still take the run after its failures.

    Without them, a restart would wait in the queue for ever: a script that
    crashes every time on the only host must end as failed instead.
    """
    candidates = list(Host.objects.filter(enabled=True))
    options = [
        [
            host
            for host in candidates
            if (not want.host or host.name == want.host) and not unsuited(run, host, want)
        ]
        for want in wanted(run)
    ]
    return distinct(options, key=lambda host: host.name) is not None


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

    def excluded(self, run: Run, want: Wanted | None = None) -> str:
        """Why this host is out of the question for the run (its placement ``want``)
        whatever its load, or ""."""
        if not self.host.enabled:
            return "is disabled"
        if self.host.devices_unverified:
            return self.host.devices_unverified
        if not self.alive:
            return "is offline"
        return health_block(self.host) or unsuited(run, self.host, want)

    def unfit(self, run: Run, want: Wanted | None = None) -> str:
        """Why the run (its placement ``want``) cannot go here now, or "" if it can."""
        excluded = self.excluded(run, want)
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
        return min(fits, key=_preference(run)), ""
    return None, pending_reason(run, caps)


def _preference(run: Run) -> Callable[[Capacity], tuple[int, int, str]]:
    """Hosts where the run failed least first, then the one left with the fewest free
    devices (best fit)."""
    return lambda cap: (run.failed_hosts.get(cap.host.name, 0), len(cap.free), cap.host.name)


def plan_gang(run: Run, caps: list[Capacity]) -> tuple[list[Capacity], str]:
    """The hosts to place ``run`` on, node rank 0 first, or [] and why it stays queued.

    All or nothing: a gang takes ``run.hosts`` hosts that each fit now, or none,
    so two gangs never each hold half of what they need. Rank 0 goes to the
    host that best fits, as a single-host run would.
    """
    if run.placement_rules:
        return plan_apart(run, caps)
    if run.hosts == 1:
        chosen, reason = plan(run, caps)
        return ([chosen] if chosen else []), reason
    fits = [cap for cap in caps if not cap.unfit(run)]
    if len(fits) >= run.hosts:
        fits.sort(key=_preference(run))
        return fits[: run.hosts], ""
    return [], gang_pending_reason(run, caps, len(fits))


def plan_apart(run: Run, caps: list[Capacity]) -> tuple[list[Capacity], str]:
    """The hosts of a run whose placements are apart, node rank 0 first, each fitting its
    own ``Wanted`` now and no two the same; or [] and why it stays queued. All or nothing,
    as a gang."""
    options, reasons = [], []
    for want in wanted(run):
        named = [cap for cap in caps if not want.host or cap.host.name == want.host]
        fits = sorted((cap for cap in named if not cap.unfit(run, want)), key=_preference(run))
        if not fits:
            if want.host and not named:
                reasons.append(want.says(f"host '{want.host}' does not exist"))
            elif want.host:
                reasons.append(want.says(f"host '{want.host}' {named[0].unfit(run, want)}"))
            else:
                reasons.append(want.says(pending_reason(run, caps, want)))
        options.append(fits)
    if reasons:
        return [], "; ".join(reasons)
    chosen = distinct(options, key=lambda cap: cap.host.pk)
    if chosen is None:
        roles = " and ".join(want.role or "a placement" for want in wanted(run))
        return [], f"{roles} each need a host of their own; the hosts free now cannot be shared"
    return chosen, ""


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


def pending_reason(run: Run, caps: list[Capacity], want: Wanted | None = None) -> str:
    """Why a run (its placement ``want``) that no host can take now waits: what is missing,
    busy or closed."""
    want = want or _own(run)
    matching = [cap for cap in caps if not cap.excluded(run, want)]
    if not matching:
        typed = [cap for cap in caps if cap.host.device_type == want.device_type]
        why = ", ".join(
            f"{cap.host.name} {cap.excluded(run, want)}" for cap in typed[:HOSTS_LISTED]
        )
        return f"no online {_wanted(want)}" + (f" ({why})" if why else "")
    plural = "s" if run.devices != 1 else ""
    busy = ", ".join(
        f"{cap.host.name}: {len(cap.free)} of {cap.host.device_count} free"
        for cap in matching[:HOSTS_LISTED]
    )
    more = ", …" if len(matching) > HOSTS_LISTED else ""
    return (
        f"no online host with {run.devices} free {want.device_type} device{plural} ({busy}{more})"
    )


def waiting_for_host(why: str, until: datetime) -> str:
    """The pending reason of a run waiting for a host that could take it."""
    return (
        f"no registered host could take it ({why}); "
        f"waiting for one until {until.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    )


def _wanted(want: Wanted) -> str:
    return f"{want.device_type} host" + (
        " with label(s) " + ", ".join(want.labels) if want.labels else ""
    )


def _devices(host: Host) -> str:
    plural = "s" if host.device_count != 1 else ""
    return f"{host.device_count} {host.device_type} device{plural}"


def _listing(hosts: list[Host], describe: Callable[[Host], str]) -> str:
    """ "a, b, c, …": what exists, for a refusal."""
    more = ", …" if len(hosts) > HOSTS_LISTED else ""
    return ", ".join(describe(host) for host in hosts[:HOSTS_LISTED]) + more
