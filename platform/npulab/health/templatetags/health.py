"""The health badge, for the host page and the host list."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html

from npulab.health.selectors import reasons_text

register = template.Library()

_CLASSES = {
    "healthy": "text-bg-success",
    "degraded": "text-bg-warning",
    "unhealthy": "text-bg-danger",
    "bad": "text-bg-danger",
    "offline": "text-bg-secondary",
    "drained": "text-bg-dark",
}


@register.simple_tag
def health_badge(health: Any) -> str:
    """A host's (or a device's) health state, its reasons in the tooltip; healthy when unknown."""
    state = getattr(health, "state", "") or "healthy"
    reasons = getattr(health, "reasons", None) or []
    title = reasons_text(reasons) if reasons else state
    if state == "drained" and getattr(health, "drain_note", ""):
        title = f"drained: {health.drain_note}"
    return format_html(
        '<span class="badge {} status-badge health-badge" data-health="{}" title="{}">{}</span>',
        _CLASSES.get(state, "text-bg-light"),
        state,
        title,
        state,
    )


@register.simple_tag
def level_badge(level: str) -> str:
    """A reason's level or a recorded state, coloured like the health badge."""
    return format_html(
        '<span class="badge {} status-badge" data-health="{}">{}</span>',
        _CLASSES.get(level, "text-bg-light"),
        level,
        level,
    )
