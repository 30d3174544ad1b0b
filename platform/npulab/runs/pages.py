"""Panels of every run page, whatever the run's kind, added by other apps from their ``ready``.

A kind's own cards are its ``RunKind.panels``, then come its capabilities' (checkpoints);
what applies to a run of any kind (the profile of a run that carried a profiling window,
the telemetry of the devices it used) is added here, and shown after those.

Headlines work the same way: the kind's own leads the page, then come those every run
may have (a profile's top findings), each rendering nothing for a run without its answer.
"""

from __future__ import annotations

from collections.abc import Iterable

from npulab.runs.capabilities import Capability
from npulab.runs.kinds import HeadlinePanel, Panel

_panels: list[Panel] = []
_headlines: list[HeadlinePanel] = []


def add_panel(panel: Panel) -> Panel:
    """Show ``panel`` on every run page; adding it twice is adding it once."""
    if panel not in _panels:
        _panels.append(panel)
    return panel


def run_panels(
    kind_panels: tuple[Panel, ...], capabilities: Iterable[Capability] = ()
) -> list[Panel]:
    """The kind's panels, those of its capabilities, then those of every run."""
    return [*kind_panels, *(panel for c in capabilities for panel in c.panels), *_panels]


def add_headline(panel: HeadlinePanel) -> HeadlinePanel:
    """Lead every run page with ``panel`` too, after the kind's own headline."""
    if panel not in _headlines:
        _headlines.append(panel)
    return panel


def run_headlines(kind_headline: HeadlinePanel | None) -> list[HeadlinePanel]:
    """The kind's headline, then those of every run."""
    return [*([kind_headline] if kind_headline else []), *_headlines]
