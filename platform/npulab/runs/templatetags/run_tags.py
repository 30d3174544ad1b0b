"""What a row of a run table shows beside the run's facts, from its kind (npulab.runs.kinds)."""

from __future__ import annotations

import shlex

from django import template

from npulab.runs.kinds import get as get_kind
from npulab.runs.models import Run

register = template.Library()

# Enough to tell runs apart in a row; the run page has them all.
HEADLINES_SHOWN = 2


@register.filter
def headline_numbers(run: Run) -> list[tuple[str, str]]:
    """The first headline numbers of a succeeded run, by name, formatted; none for the rest."""
    if run.status != Run.Status.SUCCEEDED:
        return []
    headlines = get_kind(run.kind).headlines(run)
    shown = sorted(headlines)[:HEADLINES_SHOWN]
    return [(name, f"{headlines[name].value:.4g}") for name in shown]


@register.filter
def entry_line(run: Run) -> str:
    """The entry and its arguments as a command line, for a kind whose spec has an entry."""
    spec = run.spec or {}
    entry = spec.get("entry")
    if not entry:
        return ""
    return shlex.join([entry, *spec.get("args", [])])
