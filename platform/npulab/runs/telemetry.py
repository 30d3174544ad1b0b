"""The run page's telemetry panel: the devices each attempt used, over the attempt's span.

Telemetry sits below runs and cannot name a run; this module joins the two. A run across
hosts shows every placement's host and devices (each host's own charts), node rank 0 first.
The charts are loaded from the host's telemetry fragment once the page is there (not on each
refresh of an active run's live part, which keeps the panel as it is: ``hx-preserve``);
telemetry.js fetches them, and again every minute while the attempt runs.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from npulab.runs.kinds import Panel
from npulab.runs.models import Placement, Run

# A span shorter than this is widened around its middle (an active attempt's starts this
# much earlier), so a short smoke run still shows a line and not a dot.
MIN_SPAN_S = 300


def run_telemetry_context(run: Run) -> dict[str, Any]:
    """Each attempt that ran, and each of its hosts: host, devices and the chart fragment's URL.

    An attempt's hosts are its placements; an attempt made before placements existed has
    only its own host.
    """
    placements: dict[int, list[Placement]] = {}
    for placement in run.placements.select_related("host").order_by("attempt", "node_rank"):
        placements.setdefault(placement.attempt, []).append(placement)
    shares = []
    for attempt in run.attempts.select_related("host").order_by("number"):
        if attempt.host is None:
            continue
        span = _span(attempt.started_at.timestamp(), attempt.finished_at)
        hosts = [
            (p.node_rank, p.host, p.device_indices, p.rank_range)
            for p in placements.get(attempt.number, [])
            if p.host is not None
        ] or [(0, attempt.host, attempt.device_indices, None)]
        for node, host, devices, ranks in hosts:
            url = reverse("hosts:host_telemetry", args=[host.name])
            listed = ",".join(str(index) for index in devices)
            shares.append(
                {
                    "number": attempt.number,
                    "node": node,
                    # Ranks are worth naming only when the attempt spans hosts.
                    "ranks": ranks if run.hosts > 1 else None,
                    "host": host,
                    "devices": devices,
                    "url": f"{url}?{span}&devices={listed}",
                    "active": attempt.finished_at is None,
                }
            )
    attempts = {share["number"] for share in shares}
    return {"telemetry_attempts": shares, "telemetry_many_attempts": len(attempts) > 1}


def _span(start: float, finished: Any) -> str:
    """The chart window's query: the attempt's span, widened to MIN_SPAN_S."""
    if finished is None:
        # No end: each reload of the charts reaches the present.
        return f"start={start - MIN_SPAN_S:.0f}"
    end = finished.timestamp()
    if end - start < MIN_SPAN_S:
        middle = (start + end) / 2
        start, end = middle - MIN_SPAN_S / 2, middle + MIN_SPAN_S / 2
    return f"start={start:.0f}&end={end:.0f}"


PANEL = Panel("telemetry/partials/run_panel.html", run_telemetry_context)
