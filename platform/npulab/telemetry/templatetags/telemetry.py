"""Template helpers of the telemetry parts: a device's row, a sparkline, a reading's text."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

register = template.Library()

SPARK_WIDTH = 80
SPARK_HEIGHT = 20
UNITS = {"celsius": "°C", "watts": "W", "percent": "%", "megabytes": "MB", "megahertz": "MHz"}


@register.filter
def for_device(by_device: dict[Any, Any] | None, index: Any) -> Any:
    """``by_device[index]``, or None: a dictionary lookup by a device's index."""
    if not by_device:
        return None
    return by_device.get(index)


@register.filter
def reading(readings: dict[str, float] | None, name: str) -> str:
    """A reading as people read it ("41 °C", "3,010 MB"); an en dash when not reported."""
    from workers.contract.telemetry import READINGS

    if not readings or name not in readings:
        return "—"
    value = readings[name]
    unit = UNITS.get(READINGS[name].unit, "") if name in READINGS else ""
    text = f"{value:,.0f}" if abs(value) >= 100 or value == int(value) else f"{value:.1f}"
    return f"{text} {unit}".strip()


@register.simple_tag
def sparkline(values: list[float | None] | None, label: str = "") -> str:
    """An inline SVG line of the values (gaps where None), scaled to its own range."""
    points = [(i, v) for i, v in enumerate(values or []) if v is not None]
    if len(points) < 2:
        return mark_safe('<span class="text-muted small">—</span>')
    low = min(v for _, v in points)
    high = max(v for _, v in points)
    span = (high - low) or 1.0
    step = SPARK_WIDTH / max(len(values) - 1, 1)
    coords = format_html_join(
        " ",
        "{},{}",
        (
            (f"{i * step:.1f}", f"{SPARK_HEIGHT - 1 - (v - low) / span * (SPARK_HEIGHT - 2):.1f}")
            for i, v in points
        ),
    )
    return format_html(
        '<svg class="sparkline" width="{}" height="{}" viewBox="0 0 {} {}" role="img" '
        'aria-label="{}"><title>{}: {} to {}</title>'
        '<polyline fill="none" stroke="currentColor" stroke-width="1.2" points="{}"/></svg>',
        SPARK_WIDTH,
        SPARK_HEIGHT,
        SPARK_WIDTH,
        SPARK_HEIGHT,
        label,
        label,
        f"{low:.4g}",
        f"{high:.4g}",
        coords,
    )
