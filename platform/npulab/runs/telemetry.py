"""The run page's telemetry panel: the devices each attempt used, over the attempt's span.

Telemetry sits below runs and cannot name a run; this module joins the two. The charts are
loaded from the host's telemetry fragment once the page is there (not on each refresh of
an active run's live part, which keeps the panel as it is: ``hx-preserve``); telemetry.js
fetches them, and again every minute while the attempt runs.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from npulab.runs.kinds import Panel
from npulab.runs.models import Run

# A span shorter than this is widened around its middle (an active attempt's starts this
# much earlier), so a short smoke run still shows a line and not a dot.
MIN_SPAN_S = 300


def run_telemetry_context(run: Run) -> dict[str, Any]:
    """Each attempt that ran on a host: its host, devices and the chart fragment's URL."""
    attempts = []
    for attempt in run.attempts.select_related("host").order_by("number"):
        if attempt.host is None:
            continue
        devices = ",".join(str(index) for index in attempt.device_indices)
        url = reverse("hosts:host_telemetry", args=[attempt.host.name])
        start = attempt.started_at.timestamp()
        if attempt.finished_at is None:
            # No end: each reload of the charts reaches the present.
            span = f"start={start - MIN_SPAN_S:.0f}"
        else:
            end = attempt.finished_at.timestamp()
            if end - start < MIN_SPAN_S:
                middle = (start + end) / 2
                start, end = middle - MIN_SPAN_S / 2, middle + MIN_SPAN_S / 2
            span = f"start={start:.0f}&end={end:.0f}"
        attempts.append(
            {
                "number": attempt.number,
                "host": attempt.host,
                "devices": attempt.device_indices,
                "url": f"{url}?{span}&devices={devices}",
                "active": attempt.finished_at is None,
            }
        )
    return {"telemetry_attempts": attempts}


PANEL = Panel("telemetry/partials/run_panel.html", run_telemetry_context)
