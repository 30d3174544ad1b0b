"""/metrics: the platform in Prometheus' text exposition format (0.0.4), for a Prometheus and
Grafana that already watch the cluster.

Per-device gauges come from each device's latest sample (``DeviceTelemetry``), never from a
series. An NPU host's devices are also exported under the names of Huawei's npu-exporter
(``npu_chip_info_*``, same meaning and units: °C, W, %, MB, health 1 healthy / 0 not), so a
dashboard made for it works here; every device type gets the ``npulab_device_*`` gauges.
Each family is one query at most, whatever the number of hosts.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from rest_framework import exceptions

from npulab.accounts.authentication import TokenAuthentication, token_key
from npulab.accounts.models import ApiToken, Scope
from npulab.health.models import HostState
from npulab.hosts.models import Host
from npulab.runs.access import visible_runs
from npulab.runs.models import Run
from npulab.telemetry.models import DeviceTelemetry
from workers.contract.devices import DEVICE_TYPES, NPU
from workers.contract.telemetry import HEALTH_OK, HEALTH_STATES, HEALTH_UNKNOWN, READINGS

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    type: str = "gauge"


# npu-exporter's names for the readings whose meaning and unit are the same here.
NPU_EXPORTER = {
    "temperature_c": Family("npu_chip_info_temperature", "the npu temperature (Celsius)"),
    "power_w": Family("npu_chip_info_power", "the npu power (W)"),
    "utilization_pct": Family("npu_chip_info_utilization", "the ai core utilization (%)"),
    "memory_used_mb": Family("npu_chip_info_hbm_used_memory", "the npu hbm used memory (MB)"),
    "memory_total_mb": Family("npu_chip_info_hbm_total_memory", "the npu hbm total memory (MB)"),
}
NPU_HEALTH = Family(
    "npu_chip_info_health_status", "the npu health status: 1 healthy, 0 unhealthy (npu-smi Health)"
)
_UNIT_SUFFIX = {
    "celsius": ("_c", "_celsius"),
    "watts": ("_w", "_watts"),
    "percent": ("_pct", "_percent"),
    "megabytes": ("_mb", "_megabytes"),
    "megahertz": ("_mhz", "_megahertz"),
}


def _generic_name(reading: str, unit: str, prefix: str) -> str:
    short, long = _UNIT_SUFFIX.get(unit, ("", ""))
    if short and reading.endswith(short):
        reading = reading[: -len(short)] + long
    return f"{prefix}_{reading}"


DEVICE_READINGS = {
    name: Family(
        _generic_name(name, reading.unit, "npulab_device"), f"{reading.help} ({reading.unit})"
    )
    for name, reading in READINGS.items()
}
HOST_READINGS = {
    name: Family(
        _generic_name(name, reading.unit, "npulab_host"), f"{reading.help} ({reading.unit})"
    )
    for name, reading in READINGS.items()
}
DEVICE_HEALTH = Family(
    "npulab_device_health", "The device's health as its tool reports it: 1 for its current state."
)
DEVICE_SAMPLE_TIME = Family(
    "npulab_device_last_sample_timestamp_seconds", "Unix time of the device's latest sample."
)
DEVICE_PROCESSES = Family(
    "npulab_device_processes", "Processes on the device in its latest sample."
)
HOST_HEALTH = Family(
    "npulab_host_health",
    "The host's health (docs/health.md): 1 for its current state, 0 for the others.",
)
HOST_ONLINE = Family("npulab_host_online", "1 while the host worker's heartbeats arrive.")
HOST_ENABLED = Family("npulab_host_enabled", "1 while new runs may be placed on the host.")
HOST_DEVICES = Family("npulab_host_devices", "Devices the host worker registered.")
QUEUED = Family("npulab_queue_runs", "Runs waiting for a device (queued), by device type.")
RUNS = Family("npulab_runs", "Runs by status and kind.")

FAMILIES = [
    *NPU_EXPORTER.values(),
    NPU_HEALTH,
    *DEVICE_READINGS.values(),
    *HOST_READINGS.values(),
    DEVICE_HEALTH,
    DEVICE_SAMPLE_TIME,
    DEVICE_PROCESSES,
    HOST_HEALTH,
    HOST_ONLINE,
    HOST_ENABLED,
    HOST_DEVICES,
    QUEUED,
    RUNS,
]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: str) -> str:
    return ",".join(f'{key}="{_escape(str(value))}"' for key, value in labels.items())


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if value != int(value) else str(int(value))


class Exposition:
    """Samples gathered by family, written out family by family (HELP, TYPE, samples)."""

    def __init__(self) -> None:
        self._samples: dict[str, list[str]] = {family.name: [] for family in FAMILIES}

    def add(self, family: Family, value: float, **labels: str) -> None:
        self._samples[family.name].append(f"{family.name}{{{_labels(**labels)}}} {_number(value)}")

    def lines(self) -> Iterator[str]:
        for family in FAMILIES:
            samples = self._samples[family.name]
            if not samples:
                continue
            yield f"# HELP {family.name} {_escape(family.help)}"
            yield f"# TYPE {family.name} {family.type}"
            yield from samples


def exposition(user: Any = None) -> str:
    """The /metrics body: every host and device, and the runs ``user`` may see (counted by
    status and kind, never named); none for an anonymous scraper of public metrics."""
    out = Exposition()
    fields = ("pk", "name", "status", "enabled", "device_type", "device_count", "devices")
    hosts = list(Host.objects.select_related("health").only(*fields, "health__state"))
    by_pk = {host.pk: host for host in hosts}
    for host in hosts:
        health = getattr(host, "health", None)  # none until its first heartbeat or sample
        if health is not None:
            for state in HostState.values:
                out.add(HOST_HEALTH, health.state == state, host=host.name, state=state)
        out.add(HOST_ONLINE, host.status == Host.Status.ONLINE, host=host.name)
        out.add(HOST_ENABLED, host.enabled, host=host.name)
        out.add(HOST_DEVICES, host.device_count, host=host.name, device_type=host.device_type)
    for row in DeviceTelemetry.objects.order_by("host_id", "device_index").iterator(
        chunk_size=2000
    ):
        host = by_pk.get(row.host_id)
        if host is None:
            continue  # registered after the host list was read
        _device(out, host, row)
    runs = visible_runs(user)
    queued = dict(
        runs.filter(status=Run.Status.QUEUED)
        .order_by()
        .values_list("device_type")
        .annotate(n=Count("id"))
    )
    for device_type in DEVICE_TYPES:
        out.add(QUEUED, queued.get(device_type, 0), device_type=device_type)
    counts = runs.order_by().values_list("status", "kind").annotate(n=Count("id"))
    for status, kind, count in counts:
        out.add(RUNS, count, status=status, kind=kind)
    return "\n".join(out.lines()) + "\n"


def _device(out: Exposition, host: Host, row: DeviceTelemetry) -> None:
    if row.device_index is None:
        for name, value in row.readings.items():
            if name in HOST_READINGS:
                out.add(HOST_READINGS[name], value, host=host.name)
        return
    labels = {"host": host.name, "device": str(row.device_index), "model": _model(host, row)}
    for name, value in row.readings.items():
        if name in DEVICE_READINGS:
            out.add(DEVICE_READINGS[name], value, **labels)
        if host.device_type == NPU and name in NPU_EXPORTER:
            out.add(NPU_EXPORTER[name], value, **labels)
    for state in HEALTH_STATES:
        out.add(DEVICE_HEALTH, row.health == state, state=state, **labels)
    if host.device_type == NPU and row.health != HEALTH_UNKNOWN:
        out.add(NPU_HEALTH, row.health == HEALTH_OK, **labels)
    out.add(DEVICE_SAMPLE_TIME, row.time, **labels)
    out.add(DEVICE_PROCESSES, len(row.processes), **labels)


def _model(host: Host, row: DeviceTelemetry) -> str:
    for device in host.devices or []:
        if isinstance(device, dict) and device.get("index") == row.device_index:
            return str(device.get("name") or "")
    return ""


def _refusal(status: int, detail: str) -> HttpResponse:
    response = HttpResponse(detail + "\n", status=status, content_type="text/plain; charset=utf-8")
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="npulab"'
    return response


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus scrapes this: open with NPULAB_METRICS_PUBLIC=true, else a user token with
    the read scope (``Authorization: Bearer npl_…``) or a signed-in session."""
    user = request.user
    if not settings.NPULAB["METRICS_PUBLIC"] and not request.user.is_authenticated:
        try:
            key = token_key(request)
            found = TokenAuthentication().authenticate(request) if key else None
        except (exceptions.AuthenticationFailed, exceptions.Throttled) as refused:
            return _refusal(
                401 if isinstance(refused, exceptions.AuthenticationFailed) else 429,
                str(refused.detail),
            )
        if key is None:
            return _refusal(401, "/metrics needs a user API token: Authorization: Bearer <token>.")
        if found is None:
            return _refusal(403, "Host tokens may only call /api/v1/agent/; use a user API token.")
        user, token = found
        if isinstance(token, ApiToken) and not token.has_scope(Scope.READ):
            return _refusal(403, "This token lacks the `read` scope, which /metrics needs.")
    return HttpResponse(exposition(user), content_type=CONTENT_TYPE)
