"""Filters for the profile summary's partial: microseconds as people read them."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def us(value: Any) -> str:
    """812 µs, 3.41 ms, 1.20 s; "—" for no number."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "—"
    magnitude = abs(value)
    if magnitude >= 1_000_000:
        return f"{value / 1_000_000:.2f} s"
    if magnitude >= 1000:
        return f"{value / 1000:.2f} ms"
    return f"{value:.0f} µs" if magnitude >= 10 else f"{value:.1f} µs"


@register.filter
def share(part: Any, whole: Any) -> float:
    """``part`` as a percentage of ``whole`` (0 when there is no whole), for bar widths."""
    try:
        return round(100 * float(part) / float(whole), 1) if whole else 0.0
    except (TypeError, ValueError):
        return 0.0
