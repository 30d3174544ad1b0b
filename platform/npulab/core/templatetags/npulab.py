"""Small display helpers shared by every template."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html

register = template.Library()

_STATUS_CLASSES = {
    "queued": "text-bg-secondary",
    "dispatched": "text-bg-info",
    "running": "text-bg-primary",
    "succeeded": "text-bg-success",
    "failed": "text-bg-danger",
    "cancelled": "text-bg-dark",
    "lost": "text-bg-warning",
    "expired": "text-bg-warning",
    "online": "text-bg-success",
    "offline": "text-bg-secondary",
    "pass": "text-bg-success",
    "fail": "text-bg-danger",
    "skip": "text-bg-secondary",
}


@register.simple_tag
def status_badge(status: str) -> str:
    css = _STATUS_CLASSES.get(status, "text-bg-light")
    return format_html(
        '<span class="badge {} status-badge" data-status="{}">{}</span>', css, status, status
    )


@register.filter
def duration(value: timedelta | float | None) -> str:
    """1h 02m, 3m 07s, 4.2 s."""
    if value is None or value == "":
        return "—"
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 10:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs} s"


@register.filter
def ago(value: datetime | None) -> str:
    if value is None:
        return "never"
    return f"{duration(timezone.now() - value)} ago"


@register.filter
def compact(value: Any) -> Any:
    """Floats to four significant digits; anything else unchanged."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return value


@register.filter
def as_json(value: Any) -> str:
    """Pretty JSON, as a user would save it to a file."""
    return json.dumps(value, indent=2, sort_keys=False)


_VERDICT_CLASSES = {
    "ok": "text-bg-success",
    "go": "text-bg-success",
    "incompatible": "text-bg-danger",
    "no-go": "text-bg-danger",
    "unknown": "text-bg-warning",
    "caution": "text-bg-warning",
}


@register.simple_tag
def verdict_badge(verdict: str) -> str:
    css = _VERDICT_CLASSES.get(verdict, "text-bg-light border")
    return format_html('<span class="badge {}" data-verdict="{}">{}</span>', css, verdict, verdict)


@register.filter
def percent(value: float | None) -> str:
    """+12%, −3%: a relative change."""
    if value is None:
        return "—"
    return f"{value:+.0%}".replace("-", "−")
