"""The telemetry parts of the host page, and the chart fragment it and the run page load."""

from __future__ import annotations

import time as clock
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, render

from npulab.hosts.models import Host
from npulab.telemetry import reads
from workers.contract.telemetry import READINGS

# The longest span a run page may ask for: the rollups' reach.
MAX_SPAN_S = 366 * 86400


def host_telemetry_context(host: Host, viewer: Any) -> dict[str, Any]:
    """The host page's part: each device's latest sample and last hour, the chart window."""
    return {
        "telemetry_latest": reads.latest(host.pk),
        "telemetry_sparks": reads.sparklines(host.pk),
        "telemetry_windows": list(reads.WINDOWS),
        "telemetry_window": reads.DEFAULT_WINDOW,
    }


@login_required
def host_telemetry(request: HttpRequest, name: str) -> HttpResponse:
    """Charts of the host's devices: over ``window`` (1h … 90d) back from now, or from
    ``start`` to ``end`` (Unix seconds) for the ``devices`` listed (a run's)."""
    host = get_object_or_404(Host, name=name)
    now = clock.time()
    devices = None
    try:
        if "start" in request.GET:
            start = float(request.GET["start"])
            end = float(request.GET.get("end") or now)
            if not 0 <= start < end or end - start > MAX_SPAN_S:
                raise ValueError
            chosen = None
        else:
            chosen = request.GET.get("window", reads.DEFAULT_WINDOW)
            if chosen not in reads.WINDOWS:
                raise ValueError
            start, end = now - reads.WINDOWS[chosen], now
        if request.GET.get("devices"):
            devices = [int(part) for part in request.GET["devices"].split(",")]
    except ValueError:
        return HttpResponseBadRequest(
            "window must be one of "
            + ", ".join(reads.WINDOWS)
            + "; or start < end (Unix seconds) and devices a comma-separated list of indices",
            content_type="text/plain",
        )
    data = reads.window(host.pk, start, end, devices=devices, now=now)
    charts = [
        {
            "reading": reading,
            "label": READINGS[reading].help.split(":")[0].rstrip("."),
            "unit": READINGS[reading].unit,
            "series": [
                {"device": device, "points": points}
                for device, points in sorted(
                    data["series"][reading].items(), key=lambda item: (item[0] is None, item[0])
                )
            ],
        }
        for reading in reads.CHART_READINGS
    ]
    context = {
        "host": host,
        "data": {"start": data["start"], "end": data["end"], "charts": charts},
        "source": data["source"],
        "bucket_s": data["bucket_s"],
        "has_points": any(chart["series"] for chart in charts),
        "window": chosen,
        "windows": list(reads.WINDOWS),
        "selector": chosen is not None,
    }
    return render(request, "telemetry/partials/charts.html", context)
